// docket's web UI: one page, its views chosen by the URL's fragment (#/runs, #/runs/ID,
// #/inbox, #/start, #/policies, #/switches). Every datum comes from the JSON API.

import { ApiError, call, enc, follow, signIn, signOut, token, who } from './api.js';
import { KINDS, asks, describe, errorBox, h, notice, runLink, statusBadge, time, verdictWords } from './views.js';

const view = document.getElementById('view');
let leaving = () => {};

const STATUSES = ['running', 'interrupted', 'waiting_for_human', 'completed', 'blocked', 'failed', 'cancelled'];

// What a listed run waits for besides people: the outside events its agents wait for
// (with the timeout's due time) and its other timers, as `docket runs` says it.
function awaits(r) {
  const events = r.awaited_events || [];
  const timers = r.timers || [];
  const due = (id) => timers.find((t) => t.timer_id === id);
  const said = events.map((e) => {
    const t = due(e.timeout);
    return t ? `waits for event ${e.name} until ${new Date(t.due_at_ms).toISOString()}` : `waits for event ${e.name}`;
  });
  for (const t of timers) {
    if (!events.some((e) => e.timeout === t.timer_id)) said.push(`waits until ${new Date(t.due_at_ms).toISOString()}`);
  }
  return said.length ? ` (${said.join('; ')})` : '';
}

function show(title, ...children) {
  document.title = `${title} · docket`;
  view.replaceChildren(...children);
}

/** Runs `work`, showing its error (in the API's words) in `place` instead of throwing. */
async function guarded(place, work) {
  try {
    return await work();
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) {
      place.replaceChildren(errorBox(e), h('p', {}, h('a', { href: '#/signin' }, 'Sign in again')));
    } else {
      place.replaceChildren(errorBox(e));
    }
    return undefined;
  }
}

function header() {
  const me = who();
  const place = document.getElementById('who');
  if (!me) {
    place.replaceChildren(h('a', { href: '#/signin' }, 'Sign in'));
    return;
  }
  place.replaceChildren(
    'Signed in as ', h('strong', { id: 'who-name' }, me.name), ` (${me.role}) `,
    h('button', { type: 'button', class: 'secondary', onclick: async () => {
      await signOut().catch(() => {});
      header();
      location.hash = '#/signin';
    } }, 'Sign out'),
  );
  for (const a of document.querySelectorAll('nav a')) {
    const here = location.hash.startsWith(a.getAttribute('href'));
    if (here) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
}

// ---------------------------------------------------------------------------------------
// Sign-in.

function signInView(next) {
  const out = h('div', { 'aria-live': 'polite' });
  const input = h('input', { type: 'password', id: 'token', name: 'token', autocomplete: 'off', required: true, size: 50 });
  const form = h('form', { id: 'signin', onsubmit: async (ev) => {
    ev.preventDefault();
    out.replaceChildren();
    try {
      await signIn(input.value);
      header();
      location.hash = next && next !== '#/signin' ? next : '#/runs';
    } catch (e) {
      out.replaceChildren(errorBox(e));
    }
  } },
  h('label', { for: 'token' }, 'API token', input),
  h('p', { class: 'muted' }, 'Made with docket token create; kept for this tab only.'),
  h('button', { type: 'submit' }, 'Sign in'));
  show('Sign in', h('h1', {}, 'Sign in'), form, out);
  input.focus();
}

// ---------------------------------------------------------------------------------------
// Run list.

function hashQuery() {
  const i = location.hash.indexOf('?');
  return new URLSearchParams(i < 0 ? '' : location.hash.slice(i + 1));
}

const toMs = (local) => (local ? String(new Date(local).getTime()) : '');
const toLocal = (ms) => {
  if (!ms) return '';
  const d = new Date(Number(ms));
  const pad = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
};

async function runsView() {
  const q = hashQuery();
  const status = h('select', { id: 'f-status', name: 'status' },
    h('option', { value: '' }, 'any'),
    STATUSES.map((s) => h('option', { value: s, selected: q.get('status') === s }, s.replaceAll('_', ' '))));
  const workflow = h('input', { type: 'text', id: 'f-workflow', name: 'workflow', value: q.get('workflow') ?? '' });
  const after = h('input', { type: 'datetime-local', id: 'f-after', value: toLocal(q.get('started_after')) });
  const before = h('input', { type: 'datetime-local', id: 'f-before', value: toLocal(q.get('started_before')) });
  const waiting = h('input', { type: 'checkbox', id: 'f-waiting', checked: q.get('waiting') === 'true' });
  const limit = h('select', { id: 'f-limit' }, ['25', '50', '100', '500'].map((n) =>
    h('option', { value: n, selected: (q.get('limit') ?? '50') === n }, n)));
  const filters = h('form', { class: 'inline', role: 'search', onsubmit: (ev) => {
    ev.preventDefault();
    const p = new URLSearchParams();
    if (status.value) p.set('status', status.value);
    if (workflow.value.trim()) p.set('workflow', workflow.value.trim());
    if (after.value) p.set('started_after', toMs(after.value));
    if (before.value) p.set('started_before', toMs(before.value));
    if (waiting.checked) p.set('waiting', 'true');
    if (limit.value !== '50') p.set('limit', limit.value);
    location.hash = `#/runs?${p}`;
  } },
  h('label', { for: 'f-status' }, 'Status', status),
  h('label', { for: 'f-workflow' }, 'Workflow', workflow),
  h('label', { for: 'f-after' }, 'Started after', after),
  h('label', { for: 'f-before' }, 'Started before', before),
  h('label', { class: 'check', for: 'f-waiting' }, waiting, 'Waiting for a human'),
  h('label', { for: 'f-limit' }, 'Per page', limit),
  h('button', { type: 'submit' }, 'Filter'));

  const list = h('div', { 'aria-live': 'polite' }, h('p', {}, 'Loading…'));
  show('Runs', h('h1', {}, 'Runs'), filters, list);
  const asked = new URLSearchParams(q);
  asked.delete('back');
  const page = await guarded(list, () => call('GET', `/api/runs?${asked}`));
  if (!page) return;
  // Over PostgreSQL, which worker holds each run, and until when (GET /api/workers).
  const held = await heldBy();

  const boxes = [];
  const rows = page.runs.map((r) => {
    const box = h('input', { type: 'checkbox', value: r.run_id, 'aria-label': `select run ${r.run_id}` });
    boxes.push(box);
    const waits = r.open_tickets.length > 0;
    return h('tr', { 'data-run': r.run_id },
      h('td', {}, box),
      h('td', {}, runLink(r.run_id)),
      h('td', {}, statusBadge(r.interrupted ? 'interrupted' : r.status), r.paused ? ' (paused)' : '', awaits(r)),
      h('td', {}, r.workflow),
      h('td', {}, time(r.started_at_ms)),
      h('td', {}, waits ? `yes: ${r.open_tickets.join(', ')}` : 'no'),
      h('td', {}, String(r.events)),
      ...(held ? [h('td', { class: 'worker' }, leaseWords(held.get(r.run_id)))] : []));
  });
  const all = h('input', { type: 'checkbox', 'aria-label': 'select every run on this page', onchange: (ev) => {
    for (const b of boxes) b.checked = ev.target.checked;
  } });
  const table = rows.length === 0
    ? h('p', {}, 'No run matches.')
    : h('table', {},
      h('caption', { class: 'muted' }, `${rows.length} run(s) on this page`),
      h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, all), ['Run', 'Status', 'Workflow', 'Started', 'Waits for a human', 'Events', ...(held ? ['Worker'] : [])].map((c) => h('th', { scope: 'col' }, c)))),
      h('tbody', {}, rows));

  // The API pages forward only (`next_cursor`); the cursors of the pages before this one
  // ride along in the URL (`back`, oldest first; empty for the first page), so Previous
  // is a link like the others and survives a reload.
  const pages = h('nav', { class: 'row', 'aria-label': 'Pages' });
  const back = q.getAll('back');
  const withPlace = (cursor, trail) => {
    const p = new URLSearchParams(q);
    p.delete('cursor');
    p.delete('back');
    if (cursor) p.set('cursor', cursor);
    for (const c of trail) p.append('back', c);
    return `#/runs?${p}`;
  };
  if (q.get('cursor')) {
    pages.append(h('a', { id: 'page-first', href: withPlace('', []) }, 'First page'));
    pages.append(h('a', { id: 'page-previous', href: withPlace(back.at(-1) ?? '', back.slice(0, -1)), rel: 'prev' }, 'Previous page'));
  }
  if (page.next_cursor) {
    pages.append(h('a', { id: 'page-next', href: withPlace(page.next_cursor, [...back, q.get('cursor') ?? '']), rel: 'next' }, 'Next page'));
  }
  if (q.get('cursor') || page.next_cursor) pages.append(h('span', { class: 'muted' }, `page ${back.length + 1}`));

  const reason = h('input', { type: 'text', id: 'bulk-reason', size: 40 });
  const results = h('ul', { 'aria-live': 'polite' });
  const bulk = async (action) => {
    const chosen = boxes.filter((b) => b.checked).map((b) => b.value);
    results.replaceChildren();
    if (chosen.length === 0) {
      results.append(h('li', { class: 'error', role: 'alert' }, 'Select the runs first.'));
      return;
    }
    if (action === 'cancel' && !reason.value.trim()) {
      results.append(h('li', { class: 'error', role: 'alert' }, 'A reason is required to cancel (it is recorded in run.cancelled).'));
      reason.focus();
      return;
    }
    for (const run of chosen) {
      const body = action === 'cancel' ? { reason: reason.value } : undefined;
      try {
        const r = await call('POST', `/api/runs/${enc(run)}/${action}`, body);
        results.append(h('li', {}, runLink(run), `: ${action === 'cancel' ? 'cancelled' : 'resumed'}, now `, statusBadge(r.status)));
      } catch (e) {
        results.append(h('li', {}, runLink(run), ': ', errorBox(e)));
      }
    }
  };
  const actions = h('form', { class: 'inline', onsubmit: (ev) => {
    ev.preventDefault();
    bulk(ev.submitter?.value === 'resume' ? 'resume' : 'cancel');
  } },
  h('label', { for: 'bulk-reason' }, 'Reason (for cancelling)', reason),
  h('button', { type: 'submit', value: 'cancel', class: 'danger' }, 'Cancel selected'),
  h('button', { type: 'submit', value: 'resume' }, 'Resume selected'));

  list.replaceChildren(table, pages, h('h2', {}, 'Selected runs'), actions, results);
}

// ---------------------------------------------------------------------------------------
// Tickets: the forms of the inbox and of a run's page.

function ticketForm(t) {
  const key = `${t.run_id}-${t.ticket}`.replace(/[^A-Za-z0-9_-]/g, '_');
  const s = t.subject ?? {};
  const question = s.type === 'question';
  const out = h('div', { 'aria-live': 'polite' });
  const reason = h('textarea', { id: `reason-${key}`, name: 'reason' });
  const parts = [];
  let text = null;
  const options = [];
  if (question) {
    if ((s.choices ?? []).length > 0) {
      parts.push(h('fieldset', {}, h('legend', {}, 'Options offered'),
        s.choices.map((c, i) => {
          const r = h('input', { type: 'radio', name: `choice-${key}`, value: String(i + 1), id: `choice-${key}-${i + 1}` });
          options.push(r);
          return h('label', { class: 'check', for: `choice-${key}-${i + 1}` }, r, c);
        })));
    }
    text = h('textarea', { id: `text-${key}`, name: 'text' });
    parts.push(h('label', { for: `text-${key}` },
      (s.choices ?? []).length > 0 ? 'Or answer in your own words' : 'Your answer', text));
  } else if (s.type === 'conflict') {
    // What each side said, so that the person can pick one knowingly.
    const sides = s.conflicts?.[0] ?? [];
    parts.push(h('fieldset', {}, h('legend', {}, 'Output to keep'),
      sides.map((d, i) => {
        const r = h('input', { type: 'radio', name: `choice-${key}`, value: String(i + 1), id: `choice-${key}-${i + 1}`, checked: i === 0 });
        options.push(r);
        return h('div', { class: 'option' },
          h('label', { class: 'check', for: `choice-${key}-${i + 1}` }, r,
            `${i + 1}: ${d.from ?? '?'} → ${d.to ?? '?'} (${d.output_type ?? 'output'})`),
          h('details', {}, h('summary', {}, `What ${d.from ?? 'it'} said`), h('pre', {}, JSON.stringify(d.payload ?? d, null, 2))));
      })));
  } else if (s.type === 'proceed' && (s.actions ?? []).length > 0) {
    parts.push(h('details', {}, h('summary', {}, 'The actions that wait'), h('pre', {}, JSON.stringify(s.actions, null, 2))));
  } else if (s.type === 'effect') {
    // What the effect would do (its kind, lane, key and parameters), read from the run's
    // effect.requested when the person opens it.
    const what = h('pre', {}, 'Loading…');
    const more = h('details', { ontoggle: async () => {
      if (!more.open || what.dataset.loaded) return;
      what.dataset.loaded = 'yes';
      const got = await guarded(what, () => call('GET', `/api/runs/${enc(t.run_id)}/events`));
      const asked = got?.events.find((e) => e.kind === 'effect.requested' && e.payload?.effect_id === s.effect_id);
      if (got) what.textContent = asked ? JSON.stringify(asked.payload, null, 2) : `no effect.requested for ${s.effect_id}`;
    } }, h('summary', {}, 'What the effect would do'), what);
    parts.push(more);
  } else if (s.type === 'tool') {
    parts.push(h('details', {}, h('summary', {}, 'The call'), h('pre', {}, s.invocation ?? JSON.stringify(s.arguments ?? {}, null, 2))));
  }
  const chosen = () => {
    const r = options.find((o) => o.checked);
    return r ? Number(r.value) : undefined;
  };
  const refuse = (message, field) => {
    out.replaceChildren(errorBox({ message }));
    field.focus();
  };
  const form = h('form', { class: 'ticket', 'data-ticket': t.ticket, 'data-run': t.run_id, onsubmit: async (ev) => {
    ev.preventDefault();
    const action = ev.submitter?.value ?? (question ? 'answer' : 'approve');
    const base = `/api/runs/${enc(t.run_id)}/tickets/${enc(t.ticket)}`;
    const body = { reason: reason.value };
    if (action === 'answer') {
      if (chosen() !== undefined) body.choice = chosen();
      if (text && text.value.trim()) body.text = text.value;
      if (body.choice === undefined && body.text === undefined) {
        refuse('Choose one of the options or write an answer first.', options[0] ?? text);
        return;
      }
    } else {
      if (!reason.value.trim()) {
        refuse(`A reason is required to ${action} (it is recorded with your name).`, reason);
        return;
      }
      if (action === 'approve' && chosen() !== undefined) body.choose = chosen();
    }
    for (const b of form.querySelectorAll('button')) b.disabled = true;
    try {
      const r = await call('POST', `${base}/${action}`, body);
      const did = { approve: 'Approved', deny: 'Denied', answer: 'Answered' }[action];
      const done = notice(`${did} ${t.ticket} of `, runLink(t.run_id), ': the run is now ', statusBadge(r.status),
        r.driven ? ' (going on)' : '');
      done.classList.add('ticket-done');
      done.setAttribute('tabindex', '-1');
      form.replaceChildren(done);
      done.focus();
      if (t.onDecided) t.onDecided();
    } catch (e) {
      out.replaceChildren(errorBox(e));
      for (const b of form.querySelectorAll('button')) b.disabled = false;
    }
  } },
  h('h3', {}, `${t.ticket} of `, runLink(t.run_id), t.workflow ? ` (${t.workflow})` : ''),
  h('p', { class: 'asks' }, asks(s)),
  t.reason && !(question && t.reason.includes(s.question)) ? h('p', { class: 'muted' }, `Why a person is asked: ${t.reason}`) : null,
  parts,
  h('label', { for: `reason-${key}` }, question ? 'Reason (recorded with your name; optional for an answer)' : 'Reason (recorded with your name)', reason),
  h('div', { class: 'row' },
    question
      ? h('button', { type: 'submit', value: 'answer' }, 'Answer')
      : h('button', { type: 'submit', value: 'approve' }, s.type === 'conflict' ? 'Keep the chosen output' : 'Approve'),
    h('button', { type: 'submit', value: 'deny', class: 'danger' }, question ? 'Deny (the run stops)' : 'Deny')),
  out);
  return form;
}

/** How often an open inbox asks for the tickets again. */
const INBOX_POLL_MS = 3000;

async function inboxView() {
  const list = h('div', { id: 'inbox' }, h('p', {}, 'Loading…'));
  // Holds the "no ticket" line only while no ticket is open.
  const empty = h('div', { 'aria-live': 'polite' });
  show('Approvals', h('h1', {}, 'Approvals inbox'),
    h('p', { class: 'muted' }, 'Every ticket waiting for a person, across runs; new ones appear as they open. Deciding needs the approver role; your token\'s name is recorded as who decided.'),
    h('p', {}, h('button', { type: 'button', class: 'secondary', onclick: () => load() }, 'Refresh')),
    empty, list);
  // The forms shown, by run and ticket: a form stays while its ticket is open (keeping
  // what the person typed) or while it shows the person's own decision.
  const shown = new Map();
  let stopped = false;
  let timer = null;
  leaving = () => {
    stopped = true;
    clearTimeout(timer);
  };
  async function load() {
    clearTimeout(timer);
    const got = await guarded(list, () => call('GET', '/api/tickets'));
    if (stopped) return;
    if (!got) {
      shown.clear();
    } else {
      if (shown.size === 0) list.replaceChildren();
      const open = new Map(got.tickets.map((t) => [`${t.run_id}/${t.ticket}`, t]));
      for (const [key, form] of shown) {
        if (!open.has(key) && !form.querySelector('.ticket-done')) {
          form.remove();
          shown.delete(key);
        }
      }
      for (const [key, t] of open) {
        if (shown.has(key)) continue;
        const form = ticketForm(t);
        shown.set(key, form);
        list.append(form);
      }
      empty.replaceChildren(...(open.size === 0 ? [h('p', { id: 'inbox-empty' }, 'No ticket waits for a person.')] : []));
    }
    timer = setTimeout(load, INBOX_POLL_MS);
  }
  await load();
}

// ---------------------------------------------------------------------------------------
// A run.

async function runView(run) {
  const summary = h('div', { id: 'run-summary', 'aria-live': 'polite' }, h('p', {}, 'Loading…'));
  const badge = h('span', { id: 'verification' });
  const link = h('span', { id: 'live', class: 'muted', 'aria-live': 'polite' });
  const tickets = h('div', { id: 'run-tickets' });
  const budgets = h('div', { id: 'budgets' });
  const onlyBad = h('input', { type: 'checkbox', id: 'only-bad' });
  const timeline = h('ol', { class: 'timeline', id: 'timeline' });
  const filter = () => {
    for (const li of timeline.children) li.hidden = onlyBad.checked && !li.classList.contains('bad');
  };
  onlyBad.addEventListener('change', filter);
  const reason = h('input', { type: 'text', id: 'run-reason', size: 40 });
  const actionOut = h('div', { 'aria-live': 'polite' });
  const controls = h('form', { class: 'inline', id: 'run-controls', onsubmit: (ev) => {
    ev.preventDefault();
    act(ev.submitter?.value ?? 'cancel');
  } },
  h('label', { for: 'run-reason' }, 'Reason (for cancelling, pausing or unpausing)', reason),
  h('button', { type: 'submit', value: 'cancel', class: 'danger' }, 'Cancel run'),
  h('button', { type: 'submit', value: 'pause' }, 'Pause run'),
  h('button', { type: 'submit', value: 'unpause' }, 'Unpause run'),
  h('button', { type: 'submit', value: 'resume' }, 'Resume run'));
  const done = { cancel: 'Cancelled.', pause: 'Paused.', unpause: 'Unpaused.', resume: 'Resumed.' };
  const act = async (action) => {
    actionOut.replaceChildren();
    try {
      const body = action === 'resume' ? undefined : { reason: reason.value };
      await call('POST', `/api/runs/${enc(run)}/${action}`, body);
      actionOut.replaceChildren(notice(done[action] ?? 'Done.'));
      refresh();
    } catch (e) {
      actionOut.replaceChildren(errorBox(e));
    }
  };
  // A person's domain write (docs/governance.md#a-person-writes-a-domain): recorded as
  // theirs, in a role of the run's bundle; refused writes record nothing.
  const domainOut = h('div', { 'aria-live': 'polite' });
  const domainName = h('input', { type: 'text', id: 'domain-name', size: 20, required: true });
  const domainRole = h('input', { type: 'text', id: 'domain-role', size: 16, required: true });
  const domainReason = h('input', { type: 'text', id: 'domain-reason', size: 40, required: true });
  const domainContent = h('textarea', { id: 'domain-content', rows: 4, cols: 60, required: true });
  const domainForm = h('form', { id: 'domain-write', onsubmit: async (ev) => {
    ev.preventDefault();
    domainOut.replaceChildren();
    let content;
    try {
      content = JSON.parse(domainContent.value);
    } catch (e) {
      domainOut.replaceChildren(errorBox({ message: `the content is not JSON: ${e.message}` }));
      return;
    }
    try {
      const r = await call('POST', `/api/runs/${enc(run)}/domains/${enc(domainName.value)}`,
        { role: domainRole.value, reason: domainReason.value, content });
      domainOut.replaceChildren(notice(`Written: ${r.domain.domain} version ${r.domain.written?.version}.`));
      refresh();
    } catch (e) {
      domainOut.replaceChildren(errorBox(e));
    }
  } },
  h('label', { for: 'domain-name' }, 'Domain', domainName),
  h('label', { for: 'domain-role' }, 'Your role in the bundle', domainRole),
  h('label', { for: 'domain-reason' }, 'Reason', domainReason),
  h('label', { for: 'domain-content' }, 'Content (JSON)', domainContent),
  h('button', { type: 'submit' }, 'Write the domain'));
  show(`Run ${run}`,
    h('h1', {}, 'Run ', h('code', { id: 'run-id' }, run), ' ', badge),
    summary,
    h('p', { class: 'row' },
      h('a', { id: 'export-jsonl', href: `/api/runs/${enc(run)}/export?format=jsonl`, download: `${run}.jsonl` }, 'Export (JSON lines)'),
      h('a', { id: 'export-html', href: `/api/runs/${enc(run)}/export?format=html`, target: '_blank', rel: 'noopener' }, 'Export (HTML report)')),
    controls,
    actionOut,
    h('h2', {}, 'Waiting for a person'), tickets,
    h('details', {}, h('summary', {}, 'Write a domain as a person'), domainForm, domainOut),
    h('h2', {}, 'Budgets'), budgets,
    h('h2', {}, 'Timeline ', link),
    h('p', {}, h('label', { class: 'check', for: 'only-bad' }, onlyBad, 'Failed and denied only')),
    timeline);

  let pending = null;
  let runBundle = null;
  async function refresh() {
    const s = await guarded(summary, () => call('GET', `/api/runs/${enc(run)}`));
    if (!s) return;
    runBundle = s.bundle_hash;
    // A finished run has nothing to cancel or resume.
    controls.hidden = ['completed', 'cancelled'].includes(s.status) && !s.driven;
    domainForm.hidden = ['completed', 'cancelled', 'failed'].includes(s.status);
    const facts = [
      ['Status', h('span', {}, statusBadge(s.interrupted ? 'interrupted' : s.status), s.driven ? ' (being driven)' : '', s.paused ? ` (paused by ${s.paused.by}: ${s.paused.reason})` : '')],
      ['Workflow', s.workflow],
      ['Started', time(s.started_at_ms)],
      ['Events', String(s.events)],
      ['Decider version', String(s.decider_version ?? '')],
      ['Policy bundle', h('code', {}, s.bundle_hash ?? '')],
    ];
    const held = await heldBy();
    if (held) facts.push(['Worker', h('span', { id: 'run-worker' }, leaseWords(held.get(run)) || 'nobody')]);
    if (s.forked_from) facts.push(['Forked from', runLink(s.forked_from)]);
    if (s.timer_due_at_ms) facts.push(['Timer due', time(s.timer_due_at_ms)]);
    for (const e of s.scheduled_effects ?? []) {
      facts.push(['Scheduled effect', `${e.effect_id} (${e.kind} on ${e.lane}) not before ${time(e.not_before_ms)}; its kill switch and policy are read then`]);
    }
    for (const w of s.waiting_for_events ?? []) {
      facts.push(['Waits for event', `${w.agent} waits for \`${w.name}\`${w.timeout ? ` (timeout ${w.timeout})` : ''}: ${w.reason}`]);
    }
    if ((s.signals ?? []).length > 0) {
      facts.push(['Outside events', h('ul', {}, s.signals.map((e) => h('li', {},
        `${e.signal_id} \`${e.name}\` from ${e.by}: ${e.phase}${e.delivered_to ? ` to ${e.delivered_to}` : ''}${e.refused ? ` (${e.refused})` : ''}`)))]);
    }
    if (s.scheduled) facts.push(['Started by schedule', `${s.scheduled.schedule} (made by ${s.scheduled.made_by}), due ${new Date(s.scheduled.due_at_ms).toISOString()}`]);
    if (s.blocked_by) facts.push(['Blocked by', h('code', {}, JSON.stringify(s.blocked_by))]);
    if (s.stop_reason) facts.push(['Stop reason', typeof s.stop_reason === 'string' ? s.stop_reason : JSON.stringify(s.stop_reason)]);
    if (s.output !== null && s.output !== undefined) facts.push(['Output', h('pre', {}, JSON.stringify(s.output, null, 2))]);
    summary.replaceChildren(h('dl', { class: 'facts' }, facts.map(([k, v]) => [h('dt', {}, k), h('dd', {}, v)])));
    summary.querySelector('.badge')?.setAttribute('id', 'run-status');
    tickets.replaceChildren(...(s.open_tickets.length === 0
      ? [h('p', {}, 'Nothing.')]
      : s.open_tickets.map((t) => ticketForm({ run_id: run, workflow: s.workflow, ...t }))));
    const v = await call('GET', `/api/runs/${enc(run)}/verification`).catch((e) => ({ error: e }));
    badge.replaceChildren(v.error
      ? h('span', { class: 'badge broken', title: v.error.message }, 'not verified')
      : v.chain.sound
        ? h('span', { class: 'badge sound', title: `${v.chain.events} events: links, hashes and Merkle tree check` }, 'verified')
        : h('span', { class: 'badge broken', title: v.chain.what }, `broken at event ${v.chain.seq}`));
    const st = await call('GET', `/api/runs/${enc(run)}/state`).catch(() => null);
    const rows = (st?.episodes ?? []).flatMap((ep) => ep.budgets.map((b) => h('tr', {},
      h('td', {}, ep.episode_id), h('td', {}, ep.agent), h('td', {}, b.dimension),
      h('td', {}, String(b.used)), h('td', {}, String(b.limit)), h('td', {}, String(b.left)))));
    budgets.replaceChildren(rows.length === 0
      ? h('p', {}, 'No episode budgets in this run.')
      : h('table', {}, h('thead', {}, h('tr', {}, ['Episode', 'Agent', 'Budget', 'Used', 'Limit', 'Left'].map((c) => h('th', { scope: 'col' }, c)))), h('tbody', {}, rows)));
  }
  const later = () => {
    clearTimeout(pending);
    pending = setTimeout(refresh, 150);
  };

  const add = (e) => {
    const d = describe(e);
    const li = h('li', { class: `${d.group}${d.bad ? ' bad' : ''}`, 'data-seq': e.seq, 'data-kind': e.kind },
      h('span', { class: 'seq' }, `#${e.seq}`), ' ', h('code', {}, e.kind), ' ', d.text,
      // The bundle each event was decided under, when it is not the run's own (a
      // registered version taking over, say); the run's is in the summary.
      e.policy && e.policy !== runBundle ? h('span', { class: 'muted' }, ` (policy ${e.policy})`) : null,
      h('details', {}, h('summary', {}, 'Raw event'), h('pre', {}, JSON.stringify(e, null, 2))));
    li.hidden = onlyBad.checked && !d.bad;
    timeline.append(li);
  };
  await refresh();
  const got = await guarded(timeline, () => call('GET', `/api/runs/${enc(run)}/events`));
  if (!got) return;
  for (const e of got.events) add(e);
  const last = got.events.length ? got.events[got.events.length - 1].seq : 0;
  const stop = follow(run, last, KINDS, (e) => {
    add(e);
    later();
  }, (state) => link.replaceChildren(`(${state})`));
  leaving = stop;
}

// ---------------------------------------------------------------------------------------
// Starting a run.

async function startView() {
  const out = h('div', { id: 'start-out', 'aria-live': 'polite' });
  const body = h('div', {}, h('p', {}, 'Loading…'));
  show('Start a run', h('h1', {}, 'Start a run'), body, out);
  const got = await guarded(body, () => call('GET', '/api/workflows'));
  if (!got) return;
  const byPath = new Map(got.workflows.map((w) => [w.path, w]));
  const wf = h('select', { id: 'start-workflow' }, got.workflows.map((w) => h('option', { value: w.path }, `${w.path} (${w.name})`)),
    h('option', { value: '' }, 'another path…'));
  const other = h('input', { type: 'text', id: 'start-path', size: 50 });
  const input = h('select', { id: 'start-input' });
  const custom = h('textarea', { id: 'start-json', rows: 8 });
  const runId = h('input', { type: 'text', id: 'start-run-id' });
  const fill = () => {
    const w = byPath.get(wf.value);
    other.parentElement.hidden = Boolean(w);
    // (replaceChildren takes nodes, not a list: a list would become text.)
    input.replaceChildren(
      h('option', { value: '' }, w?.input ? `the workflow's input (${w.input})` : 'the workflow\'s input file'),
      ...(w?.inputs ?? []).filter((i) => i.value !== null && i.path !== w.input).map((i) => h('option', { value: i.path }, i.path)),
      h('option', { value: '#custom' }, 'JSON typed below'));
    custom.value = '';
  };
  input.addEventListener('change', () => {
    const w = byPath.get(wf.value);
    const i = (w?.inputs ?? []).find((x) => x.path === input.value);
    if (i) custom.value = JSON.stringify(i.value, null, 2);
    else if (input.value === '') custom.value = '';
  });
  wf.addEventListener('change', fill);
  const form = h('form', { id: 'start', onsubmit: async (ev) => {
    ev.preventDefault();
    out.replaceChildren();
    const request = { workflow: wf.value || other.value.trim() };
    if (input.value !== '') {
      try {
        request.input = JSON.parse(custom.value);
      } catch (e) {
        out.replaceChildren(errorBox({ message: `the input is not JSON: ${e.message}`, where: 'input' }));
        custom.focus();
        return;
      }
    }
    if (runId.value.trim()) request.run_id = runId.value.trim();
    try {
      const r = await call('POST', '/api/runs', request);
      out.replaceChildren(notice('Started ', runLink(r.run_id), ': ', statusBadge(r.status)));
    } catch (e) {
      out.replaceChildren(errorBox(e));
    }
  } },
  h('p', { class: 'muted' }, `Workflow files under the server's directory ${got.root}.`),
  h('label', { for: 'start-workflow' }, 'Workflow', wf),
  h('label', { for: 'start-path' }, 'Workflow path on the server', other),
  h('label', { for: 'start-input' }, 'Input', input),
  h('label', { for: 'start-json' }, 'Input JSON (when not the workflow\'s own)', custom),
  h('label', { for: 'start-run-id' }, 'Run id (optional)', runId),
  h('p', {}, h('button', { type: 'submit' }, 'Start')));
  body.replaceChildren(form);
  fill();
}

// ---------------------------------------------------------------------------------------
// Policies.

/** `GET /api/policies/diff` as a person reads it: which handoffs now decide otherwise, and
 * which rules were added, removed or changed. */
function diffView(d) {
  const classes = { allow: 'allow', deny: 'deny', needs_approval: 'review' };
  const verdict = (v) => h('span', { class: classes[String(v.verdict ?? '').toLowerCase()] ?? '' },
    verdictWords(v.verdict), v.rule_id ? h('span', { class: 'muted' }, ` by ${v.rule_id}`) : null);
  const pairs = d.pairs ?? [];
  const rules = d.rules ?? [];
  return h('div', { id: 'diff-out' },
    h('p', {}, 'From ', h('code', {}, d.old_hash), ' to ', h('code', {}, d.new_hash), ': ',
      pairs.length === 0 && rules.length === 0 ? 'no difference.' : `${pairs.length} handoff(s) decide otherwise, ${rules.length} rule(s) differ.`),
    pairs.length === 0 ? null : h('table', { id: 'diff-pairs' },
      h('caption', {}, 'Handoffs whose verdict or deciding rule changed'),
      h('thead', {}, h('tr', {}, ['From', 'To', 'Input', 'Before', 'After', 'Why now'].map((c) => h('th', { scope: 'col' }, c)))),
      h('tbody', {}, pairs.map((p) => h('tr', {},
        h('td', {}, p.from), h('td', {}, p.to), h('td', {}, p.input),
        h('td', {}, verdict(p.old)), h('td', {}, verdict(p.new)), h('td', {}, p.new?.reason ?? ''))))),
    rules.length === 0 ? null : h('table', { id: 'diff-rules' },
      h('caption', {}, 'Rules and settings'),
      h('thead', {}, h('tr', {}, ['Section', 'Rule or setting', 'Change'].map((c) => h('th', { scope: 'col' }, c)))),
      h('tbody', {}, rules.map((r) => h('tr', { class: `change-${r.change}` },
        h('td', {}, h('code', {}, r.section)), h('td', {}, h('code', {}, r.id)), h('td', {}, r.change))))),
    h('details', {}, h('summary', {}, 'As JSON'), h('pre', {}, JSON.stringify(d, null, 2))));
}

async function policiesView() {
  const bundles = h('div', {}, h('p', {}, 'Loading…'));
  const diff = h('div');
  const rules = h('div', {}, h('p', {}, 'Loading…'));
  show('Policies', h('h1', {}, 'Policies'),
    h('h2', {}, 'Bundle versions recorded in runs'), bundles,
    h('h2', {}, 'Difference between two versions'), diff,
    h('h2', {}, 'Handoff rules (latest registered version)'), rules);
  const got = await guarded(bundles, () => call('GET', '/api/policies'));
  if (got) {
    bundles.replaceChildren(got.bundles.length === 0 ? h('p', {}, 'No run recorded a bundle yet.') : h('table', {},
      h('thead', {}, h('tr', {}, ['Hash', 'Name', 'Bundle', 'Version', 'Runs', 'First recorded', 'Source'].map((c) => h('th', { scope: 'col' }, c)))),
      h('tbody', {}, got.bundles.map((b) => {
        const place = h('div');
        return h('tr', {}, h('td', {}, h('code', {}, b.hash)), h('td', {}, b.name), h('td', {}, b.bundle ?? ''),
          h('td', {}, b.version ?? ''), h('td', {}, String(b.runs)), h('td', {}, time(b.first_recorded_ms)),
          h('td', {}, h('button', { type: 'button', class: 'secondary', onclick: async () => {
            const p = await guarded(place, () => call('GET', `/api/policies/${enc(b.hash)}`));
            if (p) place.replaceChildren(h('pre', {}, p.source));
          } }, 'Show'), place));
      }))));
    const pick = (id, label, i) => h('label', { for: id }, label, h('select', { id }, got.bundles.map((b, j) =>
      h('option', { value: b.hash, selected: j === i }, `${b.bundle ?? b.name} ${b.version ?? ''} ${b.hash.slice(0, 12)}`))));
    const out = h('div', { 'aria-live': 'polite' });
    diff.replaceChildren(h('form', { class: 'inline', onsubmit: async (ev) => {
      ev.preventDefault();
      const old = document.getElementById('diff-old').value;
      const neu = document.getElementById('diff-new').value;
      const d = await guarded(out, () => call('GET', `/api/policies/diff?old=${enc(old)}&new=${enc(neu)}`));
      if (d) out.replaceChildren(diffView(d));
    } }, pick('diff-old', 'Before', 0), pick('diff-new', 'After', Math.max(0, got.bundles.length - 1)),
    h('button', { type: 'submit' }, 'Compare')), out);
  }
  const r = await guarded(rules, () => call('GET', '/api/governance/handoff-rules'));
  if (r) {
    const list = r.rules ?? [];
    const cols = [...new Set(list.flatMap((x) => Object.keys(x)))];
    rules.replaceChildren(
      h('p', {}, `Bundle ${r.bundle}, version ${r.version}, hash `, h('code', {}, r.hash ?? '')),
      list.length === 0 ? h('p', {}, 'No handoff rule.') : h('table', {},
        h('thead', {}, h('tr', {}, cols.map((c) => h('th', { scope: 'col' }, c)))),
        h('tbody', {}, list.map((x) => h('tr', {}, cols.map((c) => h('td', {},
          typeof x[c] === 'object' && x[c] !== null ? JSON.stringify(x[c]) : String(x[c] ?? ''))))))));
  }
}

// ---------------------------------------------------------------------------------------
// Kill switches.

// Workers (a PostgreSQL store): who drives what.

/** The leases by run id, or null where this server drives its own runs (a data directory). */
async function heldBy() {
  try {
    const got = await call('GET', '/api/workers');
    return got.shared ? new Map(got.leases.map((l) => [l.run_id, l])) : null;
  } catch {
    return null;
  }
}

/** A run's lease in words: its holder and time left, queued, waiting on a timer, or nothing. */
function leaseWords(lease) {
  if (!lease) return '';
  if (lease.holder) {
    const left = lease.expires_in_ms;
    return `${lease.holder} (claim ${lease.epoch}, ${left >= 0 ? `lease ${Math.ceil(left / 1000)} s left` : 'lease lapsed'})`;
  }
  if (lease.queued) return 'queued';
  const due = lease.due_in_ms;
  if (due === null || due === undefined) return '';
  return due > 0 ? `timer due in ${Math.ceil(due / 1000)} s` : 'timer due: claimable';
}

async function workersView() {
  const place = h('div', { 'aria-live': 'polite' }, h('p', {}, 'Loading…'));
  show('Workers', h('h1', {}, 'Workers'), place);
  const got = await guarded(place, () => call('GET', '/api/workers'));
  if (!got) return;
  if (!got.shared) {
    place.replaceChildren(h('p', {}, got.note));
    return;
  }
  const workers = got.workers.length === 0 ? h('p', {}, 'No worker has started.') : h('table', { id: 'workers' },
    h('thead', {}, h('tr', {}, ['Worker', 'Name', 'Alive', 'Runs held', 'Last renewal'].map((c) => h('th', { scope: 'col' }, c)))),
    h('tbody', {}, got.workers.map((w) => h('tr', { 'data-worker': w.holder },
      h('td', {}, h('code', {}, w.holder)), h('td', {}, w.name), h('td', {}, w.alive ? 'yes' : 'stopped'),
      h('td', {}, String(w.runs_held)), h('td', {}, `${Math.round(w.renewed_ms_ago / 1000)} s ago`)))));
  const leases = got.leases.length === 0 ? h('p', {}, 'No run has been queued for workers.') : h('table', { id: 'leases' },
    h('thead', {}, h('tr', {}, ['Run', 'Held by', 'Queued'].map((c) => h('th', { scope: 'col' }, c)))),
    h('tbody', {}, got.leases.map((l) => h('tr', { 'data-run': l.run_id },
      h('td', {}, runLink(l.run_id)), h('td', {}, leaseWords(l.holder ? l : null) || 'nobody'), h('td', {}, l.queued ? 'yes' : 'no')))));
  place.replaceChildren(h('h2', {}, 'Workers'), workers, h('h2', {}, 'Runs and their leases'), leases);
}

// Schedules: runs started on a cron expression or an interval (docs/schedules.md).

async function schedulesView() {
  const place = h('div', { 'aria-live': 'polite' }, h('p', {}, 'Loading…'));
  const out = h('div', { 'aria-live': 'polite' });
  show('Schedules', h('h1', {}, 'Schedules'),
    h('p', { class: 'muted' }, 'Each firing starts a run named after the schedule and the instant it was due; docket schedule add (or POST /api/schedules) makes one.'),
    out, place);
  const act = async (name, method, path, words) => {
    out.replaceChildren();
    try {
      await call(method, `/api/schedules/${enc(name)}${path}`);
      out.replaceChildren(notice(`${words} ${name}.`));
      load();
    } catch (e) {
      out.replaceChildren(errorBox(e));
    }
  };
  async function load() {
    const got = await guarded(place, () => call('GET', '/api/schedules'));
    if (!got) return;
    const when = (s) => s.timing.kind === 'cron' ? `cron ${s.timing.cron} (${s.timing.time_zone})` : `every ${s.timing.every}`;
    const list = got.schedules.length === 0 ? h('p', {}, 'No schedule yet.') : h('table', { id: 'schedules' },
      h('thead', {}, h('tr', {}, ['Schedule', 'State', 'When', 'Next due', 'Overlap', 'Catch-up', 'Made by', 'Last run', ''].map((c) => h('th', { scope: 'col' }, c)))),
      h('tbody', {}, got.schedules.map((s) => h('tr', { 'data-schedule': s.name },
        h('td', {}, h('code', {}, s.name)), h('td', {}, s.state), h('td', {}, when(s)),
        h('td', {}, s.state === 'active' ? time(s.next_at_ms) : ''), h('td', {}, s.overlap), h('td', {}, s.catch_up),
        h('td', {}, s.made_by), h('td', {}, s.last_run ? runLink(s.last_run) : ''),
        h('td', {}, s.state === 'removed' ? '' : [
          s.state === 'paused'
            ? h('button', { type: 'button', onclick: () => act(s.name, 'POST', '/unpause', 'Unpaused') }, `Unpause ${s.name}`)
            : h('button', { type: 'button', onclick: () => act(s.name, 'POST', '/pause', 'Paused') }, `Pause ${s.name}`),
          h('button', { type: 'button', class: 'danger', onclick: () => act(s.name, 'DELETE', '', 'Removed') }, `Remove ${s.name}`),
        ])))));
    const firings = got.firings.length === 0 ? h('p', {}, 'No firing yet.') : h('table', { id: 'firings' },
      h('thead', {}, h('tr', {}, ['Due', 'Schedule', 'What became of it', 'Late', 'Run'].map((c) => h('th', { scope: 'col' }, c)))),
      h('tbody', {}, got.firings.slice().reverse().map((f) => h('tr', {},
        h('td', {}, time(f.due_at_ms)), h('td', {}, h('code', {}, f.schedule)),
        h('td', {}, `${f.outcome.replaceAll('_', ' ')}${f.missed_count ? ` (${f.missed_count} firings)` : ''}${f.previous_run ? ` (previous run ${f.previous_run})` : ''}${f.error ? `: ${f.error}` : ''}`),
        h('td', {}, `${Math.round(f.late_ms / 1000)} s`), h('td', {}, f.run_id && !f.outcome.startsWith('started') ? f.run_id : f.run_id ? runLink(f.run_id) : '')))));
    place.replaceChildren(list, h('h2', {}, 'Latest firings'), firings);
  }
  load();
}

async function switchesView() {
  const engaged = h('div', {}, h('p', {}, 'Loading…'));
  const history = h('div');
  const out = h('div', { 'aria-live': 'polite' });
  const name = h('input', { type: 'text', id: 'switch-name', value: 'global' });
  const reason = h('input', { type: 'text', id: 'switch-reason', size: 40 });
  const flip = async (sw, action, why) => {
    out.replaceChildren();
    try {
      await call('POST', `/api/kill-switches/${enc(sw)}/${action}`, { reason: why });
      out.replaceChildren(notice(`${action === 'engage' ? 'Engaged' : 'Released'} ${sw}.`));
      load();
    } catch (e) {
      out.replaceChildren(errorBox(e));
    }
  };
  show('Kill switches', h('h1', {}, 'Kill switches'),
    h('p', { class: 'muted' }, 'An engaged switch stops every effect of its lane (global: every effect) from its next one on.'),
    h('h2', {}, 'Engaged'), engaged,
    h('h2', {}, 'Engage one'),
    h('form', { class: 'inline', onsubmit: (ev) => {
      ev.preventDefault();
      flip(name.value.trim(), 'engage', reason.value);
    } }, h('label', { for: 'switch-name' }, 'Switch (global or a lane)', name),
    h('label', { for: 'switch-reason' }, 'Reason', reason),
    h('button', { type: 'submit', class: 'danger' }, 'Engage')),
    out,
    h('h2', {}, 'History'), history);
  async function load() {
    const got = await guarded(engaged, () => call('GET', '/api/kill-switches'));
    if (!got) return;
    const on = Object.entries(got.engaged ?? {});
    engaged.replaceChildren(on.length === 0 ? h('p', {}, 'None: effects run.') : h('table', {},
      h('thead', {}, h('tr', {}, ['Switch', 'By', 'Reason', 'Since', 'Release'].map((c) => h('th', { scope: 'col' }, c)))),
      h('tbody', {}, on.map(([sw, f]) => {
        const why = h('input', { type: 'text', 'aria-label': `reason to release ${sw}` });
        return h('tr', {}, h('td', {}, h('code', {}, sw)), h('td', {}, f.by), h('td', {}, f.reason), h('td', {}, time(f.at_ms)),
          h('td', {}, h('form', { class: 'inline', onsubmit: (ev) => {
            ev.preventDefault();
            flip(sw, 'release', why.value);
          } }, why, h('button', { type: 'submit' }, `Release ${sw}`))));
      }))));
    const flips = got.history ?? [];
    history.replaceChildren(flips.length === 0 ? h('p', {}, 'No flip yet.') : h('table', {},
      h('thead', {}, h('tr', {}, ['When', 'Switch', 'Engaged', 'By', 'Reason'].map((c) => h('th', { scope: 'col' }, c)))),
      h('tbody', {}, flips.slice().reverse().map((f) => h('tr', {}, h('td', {}, time(f.at_ms)),
        h('td', {}, h('code', {}, f.switch ?? f.lane ?? '')), h('td', {}, String(f.engaged ?? f.on ?? '')),
        h('td', {}, f.by), h('td', {}, f.reason))))));
  }
  load();
}

// ---------------------------------------------------------------------------------------
// Routing.

async function route() {
  leaving();
  leaving = () => {};
  const hash = location.hash || '#/runs';
  header();
  if (!token() && hash !== '#/signin') {
    signInView(hash);
    return;
  }
  const path = hash.split('?')[0];
  const run = path.match(/^#\/runs\/(.+)$/);
  if (path === '#/signin') signInView('#/runs');
  else if (run) await runView(decodeURIComponent(run[1]));
  else if (path === '#/inbox') await inboxView();
  else if (path === '#/start') await startView();
  else if (path === '#/policies') await policiesView();
  else if (path === '#/switches') await switchesView();
  else if (path === '#/workers') await workersView();
  else if (path === '#/schedules') await schedulesView();
  else await runsView();
  if (!view.contains(document.activeElement)) view.focus({ preventScroll: true });
}

window.addEventListener('hashchange', route);
// A section's link followed while on it shows it afresh (no hashchange then).
document.querySelector('header').addEventListener('click', (ev) => {
  const a = ev.target.closest('a');
  if (a && a.getAttribute('href') === location.hash) route();
});
route();
