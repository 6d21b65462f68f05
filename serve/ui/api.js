// The JSON API from the browser (docs/api.md). The bearer token is asked once and kept
// for the tab (sessionStorage); each request sends it. The event stream and export links
// cannot send headers: they use the session cookie POST /api/session sets.

const TOKEN = 'docket.token';
const WHO = 'docket.who';

/** An API error in the API's own words: `message`, and `where` it is. */
export class ApiError extends Error {
  constructor(status, code, message, where, problems) {
    super(message);
    this.status = status;
    this.code = code;
    this.where = where ?? null;
    this.problems = problems ?? null;
  }
}

export const token = () => sessionStorage.getItem(TOKEN);

/** Who signed in: `{ name, role }`, or null. */
export function who() {
  try {
    return JSON.parse(sessionStorage.getItem(WHO) ?? 'null');
  } catch {
    return null;
  }
}

/** One request; the answer's JSON, or an ApiError. */
export async function call(method, path, body) {
  const headers = { Accept: 'application/json' };
  const t = token();
  if (t) headers.Authorization = `Bearer ${t}`;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  let res;
  try {
    res = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: 'same-origin',
    });
  } catch (e) {
    throw new ApiError(0, 'network', `the server did not answer (${e.message})`, null);
  }
  const text = await res.text();
  let json = null;
  try {
    json = text ? JSON.parse(text) : null;
  } catch {
    json = null;
  }
  if (!res.ok) {
    const e = json && json.error;
    throw new ApiError(res.status, e?.code ?? 'http',
      e?.message ?? `${res.status} ${res.statusText}`, e?.where, e?.problems);
  }
  return json;
}

/** Checks the token by opening a browser session with it; keeps both for the tab. */
export async function signIn(t) {
  sessionStorage.setItem(TOKEN, t.trim());
  try {
    const me = await call('POST', '/api/session');
    sessionStorage.setItem(WHO, JSON.stringify({ name: me.name, role: me.role }));
    return me;
  } catch (e) {
    sessionStorage.removeItem(TOKEN);
    sessionStorage.removeItem(WHO);
    throw e;
  }
}

/** Makes a new session cookie from the kept token (after a server restart, say). */
export async function renewSession() {
  if (!token()) return false;
  try {
    await call('POST', '/api/session');
    return true;
  } catch {
    return false;
  }
}

export async function signOut() {
  try {
    await call('DELETE', '/api/session');
  } finally {
    sessionStorage.removeItem(TOKEN);
    sessionStorage.removeItem(WHO);
  }
}

export const enc = encodeURIComponent;

/**
 * Follows a run's events live: every event after `after`, then each new one, in order,
 * to `onEvent`. After a disconnect it reconnects from the last sequence seen (`?after=`),
 * making a new session first if the stream was refused. A gap (an event kind this page
 * does not listen for) is filled from GET /api/runs/{run}/events. Returns a stop function.
 */
export function follow(run, after, kinds, onEvent, onLink) {
  let last = after;
  let source = null;
  let stopped = false;
  let timer = null;
  let wait = 500;
  const deliver = (event) => {
    if (event.seq <= last) return;
    last = event.seq;
    onEvent(event);
  };
  const fill = async (upTo) => {
    const got = await call('GET', `/api/runs/${enc(run)}/events?after=${last}`);
    for (const e of got.events) if (e.seq <= upTo) deliver(e);
  };
  // One event at a time, in arrival order, even while a gap is being filled.
  let queue = Promise.resolve();
  const received = (message) => {
    queue = queue.then(() => handle(message));
  };
  const handle = async (message) => {
    let event;
    try {
      event = JSON.parse(message.data);
    } catch {
      return;
    }
    if (event.seq > last + 1) {
      try {
        await fill(event.seq - 1);
      } catch {
        // The stream's own event still comes in order below; the gap is refilled on reconnect.
      }
    }
    deliver(event);
  };
  const open = () => {
    if (stopped) return;
    source = new EventSource(`/api/runs/${enc(run)}/events/stream?after=${last}`);
    source.onopen = () => {
      wait = 500;
      onLink('live');
    };
    for (const kind of kinds) source.addEventListener(kind, received);
    source.addEventListener('error', async (e) => {
      // An `error` event the server sent carries its error object; a lost connection none.
      if (e.data) onLink(`stopped: ${JSON.parse(e.data).error.message}`);
      source.close();
      if (stopped) return;
      onLink('reconnecting');
      await renewSession();
      timer = setTimeout(open, wait);
      wait = Math.min(wait * 2, 10000);
    });
  };
  open();
  return () => {
    stopped = true;
    clearTimeout(timer);
    if (source) source.close();
  };
}
