// Building the page from API answers: elements made with text nodes only (never HTML
// from the API: an agent's output may hold markup), and what each event means.

/** An element: `h('a', { href }, 'text', child...)`; `on*` attributes become listeners. */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs ?? {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else if (v === true) el.setAttribute(k, '');
    else el.setAttribute(k, String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

/** An API error as the user reads it: its message and where. */
export function errorBox(e) {
  const where = e.where ? h('span', {}, ' (', h('code', {}, e.where), ')') : null;
  const problems = Array.isArray(e.problems)
    ? h('ul', {}, e.problems.map((p) => h('li', {}, p.message ?? JSON.stringify(p))))
    : null;
  return h('div', { class: 'error', role: 'alert' }, e.message ?? String(e), where, problems);
}

export const notice = (text, ...more) => h('div', { class: 'notice', role: 'status' }, text, ...more);

export function time(ms) {
  if (ms === null || ms === undefined) return '';
  const d = new Date(ms);
  return h('time', { datetime: d.toISOString() }, d.toLocaleString());
}

export const statusBadge = (status) =>
  h('span', { class: `badge status-${status}`, 'data-status': status }, (status ?? '').replaceAll('_', ' '));

export const runLink = (run) => h('a', { href: `#/runs/${encodeURIComponent(run)}` }, run);

/**
 * Every event kind the decider records (docs/events.md); the stream names each, and an
 * EventSource hears only the names it listens for. Kept equal to `RunEvent::KINDS` by
 * the test in serve/src/ui.rs.
 */
export const KINDS = [
  'run.requested', 'agent.call_scheduled', 'agent.circuit_checked', 'agent.call_degraded',
  'agent.responded', 'agent.call_failed', 'handoff.allowed', 'handoff.denied',
  'policy.decided', 'output.held', 'output.conflict_detected', 'output.archived',
  'fanout.joined', 'fanout.branch_failed', 'task.reassigned', 'risk.classified', 'human.escalated',
  'human.decided', 'human.overrode', 'human.wrote_domain', 'run.completed', 'run.blocked', 'run.failed',
  'run.cancelled', 'episode.started', 'episode.action_denied', 'episode.finished',
  'episode.stopped', 'domain.written', 'domain.write_denied', 'effect.requested',
  'effect.deduplicated', 'effect.admitted', 'effect.refused', 'effect.ready',
  'effect.started', 'effect.sandbox_started', 'effect.sandbox_ran', 'effect.verifier_called', 'effect.settled', 'effect.dry_run',
  'effect.kill_switch_checked', 'effect.applied', 'effect.failed', 'effect.verified',
  'effect.recovered', 'tool.call_scheduled', 'tool.denied', 'tool.returned', 'tool.failed',
  'timer.set', 'timer.fired', 'run.paused', 'run.unpaused', 'signal.received', 'signal.kept',
  'signal.refused', 'signal.awaited', 'signal.delivered', 'signal.timed_out',
];

/** A decision that refused: `needs_approval` waits for a person and is no denial. */
const denied = (d) => d && typeof d === 'object' && String(d.verdict ?? '').toLowerCase() === 'deny';
/** A verdict as a person reads it (`needs_approval` → `needs approval`). */
export const verdictWords = (v) => String(v ?? '').toLowerCase().replace('_', ' ');

/** What an event is on the timeline: its group, one line, and whether it failed or denied. */
export function describe(e) {
  const p = e.payload ?? {};
  const k = e.kind;
  const rule = (d) => (d && d.rule_id ? ` by rule ${d.rule_id}` : '');
  // A reason recorded empty says so, never a dangling colon.
  const why = (r) => (String(r ?? '').trim() ? r : 'no reason given');
  if (k === 'handoff.allowed') {
    return { group: 'handoff', bad: false, text: `handoff ${p.from} → ${p.to} (${p.output_type}) allowed${rule(p.decision)}` };
  }
  if (k === 'handoff.denied') {
    return { group: 'handoff', bad: true, text: `handoff ${p.from} → ${p.to} (${p.output_type}) denied${rule(p.decision)}: ${why(p.decision?.reason)}` };
  }
  if (k === 'policy.decided') {
    const d = p.decision ?? {};
    // The rule after the reason, named once (a reason may name it already), as
    // `docket events` writes it.
    const reason = why(d.reason);
    const named = d.rule_id && !reason.includes(d.rule_id) ? ` [${d.rule_id}]` : '';
    return { group: 'decision', bad: denied(d), text: `${p.subject}: ${verdictWords(d.verdict)}: ${reason}${named}` };
  }
  if (k === 'human.escalated') {
    return { group: 'human', bad: false, text: `${p.ticket} opened: ${why(p.reason)}` };
  }
  if (k === 'human.decided') {
    const how = !p.approved ? 'denied' : p.answer !== undefined && p.answer !== null ? 'answered' : 'approved';
    const choice = p.choice ? ` (option ${p.choice})` : '';
    const answer = p.answer ? ` “${p.answer}”` : '';
    return { group: 'human', bad: !p.approved, text: `${p.ticket} ${how}${choice}${answer} by ${p.by}${p.reason ? `: ${p.reason}` : ''}` };
  }
  if (k === 'human.overrode') {
    return { group: 'human', bad: false, text: `override by ${p.by} (${p.role}) of ${p.rule_id ?? 'the blocking rule'}: ${why(p.reason)}` };
  }
  if (k === 'task.reassigned') {
    return { group: 'decision', bad: true, text: `${p.from}'s output rejected (${p.error_code}: ${why(p.error_message)}); its task reassigned to ${p.to} [${p.rule_id}]` };
  }
  if (k === 'human.wrote_domain') {
    return { group: 'human', bad: false, text: `${p.by} (${p.role}) writes ${p.domain}: ${why(p.reason)}` };
  }
  if (k === 'effect.requested') {
    return { group: 'effect', bad: false, text: `${p.agent ?? ''} asks for the effect ${p.effect_kind ?? ''} ${p.effect_id ?? ''} (key ${p.idempotency_key ?? ''}, lane ${p.lane ?? ''})` };
  }
  if (k.startsWith('effect.')) {
    const bad = ['effect.refused', 'effect.failed'].includes(k);
    const key = p.idempotency_key ?? p.key ?? p.effect_id ?? '';
    const up = p.escalated_to ? `; escalated to its parent episode ${p.escalated_to}` : '';
    return { group: 'effect', bad, text: `${k.slice(7).replaceAll('_', ' ')} ${key}${p.reason ? `: ${p.reason}` : ''}${up}` };
  }
  if (k === 'tool.call_scheduled') {
    return { group: 'effect', bad: false, text: `tool ${p.name ?? ''} called by ${p.request?.agent ?? ''} (${p.tool_call_id ?? ''})` };
  }
  if (k === 'tool.denied') {
    return { group: 'effect', bad: true, text: `${p.agent}'s call of tool ${p.name} (${p.tool_call_id}) refused${p.rule_id ? ` by rule ${p.rule_id}` : ''}: ${why(p.reason)}` };
  }
  if (k === 'tool.returned') {
    const result = JSON.stringify(p.result ?? null);
    return { group: 'effect', bad: false, text: `tool call ${p.tool_call_id} returned ${result.length > 60 ? `${result.slice(0, 60)}…` : result}` };
  }
  if (k === 'tool.failed') {
    return { group: 'effect', bad: true, text: `tool call ${p.tool_call_id} failed ${p.code}: ${String(p.message ?? '').trim() || 'no message given'}` };
  }
  if (k === 'timer.set') {
    const due = new Date(p.due_at_ms ?? 0).toISOString();
    if (p.effect_id) return { group: 'effect', bad: false, text: `${p.timer_id}: effect ${p.effect_id} scheduled for ${due}` };
    return { group: 'call', bad: false, text: `${p.timer_id}: ${p.agent} waits until ${due}: ${why(p.reason)}` };
  }
  if (k === 'timer.fired') {
    return { group: 'call', bad: false, text: `${p.timer_id} fired at ${new Date(p.at_ms ?? 0).toISOString()}` };
  }
  if (k === 'run.paused') return { group: 'run', bad: true, text: `run paused by ${p.by}: ${why(p.reason)}` };
  if (k === 'run.unpaused') return { group: 'run', bad: false, text: `run unpaused by ${p.by}: ${why(p.reason)}` };
  if (k === 'signal.received') return { group: 'call', bad: false, text: `event \`${p.name}\` received from ${p.by}` };
  if (k === 'signal.kept') return { group: 'call', bad: false, text: `${p.signal_id} \`${p.name}\` kept for the run` };
  if (k === 'signal.refused') return { group: 'call', bad: true, text: `${p.signal_id} \`${p.name}\` refused: ${why(p.reason)}` };
  if (k === 'signal.awaited') return { group: 'call', bad: false, text: `${p.agent} waits for \`${p.name}\`${p.timeout ? ` (timeout ${p.timeout})` : ''}: ${why(p.reason)}` };
  if (k === 'signal.delivered') return { group: 'call', bad: false, text: `${p.signal_id} \`${p.name}\` delivered to ${p.agent}` };
  if (k === 'signal.timed_out') return { group: 'call', bad: true, text: `${p.agent}'s wait for \`${p.name}\` timed out (${p.timer_id})` };
  if (k === 'agent.call_failed') {
    return { group: 'call', bad: true, text: `call ${p.request_id} failed: ${p.code} ${p.message}` };
  }
  if (k === 'agent.call_scheduled') {
    const r = p.request ?? {};
    const again = p.again_of ? `, again (of ${p.again_of})` : '';
    return { group: 'call', bad: false, text: `call ${r.request_id ?? ''} to ${r.target_agent ?? p.agent ?? ''} scheduled${again}` };
  }
  if (k === 'agent.responded') {
    const r = p.response ?? {};
    const actions = (r.actions ?? []).map((a) => a.type ?? a.action).filter(Boolean);
    return { group: 'call', bad: /error|fail/i.test(String(r.status ?? '')),
      text: `${p.request_id} answered ${r.status ?? ''}${actions.length ? `: ${actions.join(', ')}` : ''}` };
  }
  if (k === 'run.requested') {
    return { group: 'run', bad: false, text: `run requested: workflow ${p.workflow?.name ?? ''}, decider version ${p.decider_version ?? 0}${p.forked_from ? `, forked from ${p.forked_from.run_id}` : ''}${p.scheduled ? `, started by schedule ${p.scheduled.schedule}` : ''}` };
  }
  if (k === 'risk.classified') {
    return { group: 'decision', bad: p.verdict !== 'SAFE', text: `${p.classifier} classified ${p.request_id}: ${p.verdict}: ${why(p.reason)}` };
  }
  if (k === 'output.conflict_detected') {
    return { group: 'decision', bad: false, text: `conflicting outputs in ${p.group} (${(p.candidates ?? []).length} candidates; resolution ${p.resolution ?? ''})` };
  }
  if (k === 'output.archived') {
    return { group: 'decision', bad: false, text: `output of ${p.delivery?.from ?? ''} archived in ${p.group}: ${why(p.reason)}` };
  }
  if (k === 'episode.started') {
    return { group: 'episode', bad: false, text: `episode ${p.episode_id} (${p.episode_type ?? ''}) started for ${p.agent}${p.goal ? `: ${p.goal}` : ''}${rule(p.decision)}` };
  }
  if (k === 'episode.finished') {
    return { group: 'episode', bad: false, text: `episode ${p.episode_id} of ${p.agent} finished ${p.result?.status ?? ''}${p.result?.summary ? `: ${p.result.summary}` : ''}` };
  }
  if (k === 'episode.stopped') {
    return { group: 'episode', bad: p.condition !== 'success_achieved', text: `episode ${p.episode_id} stopped: ${String(p.condition ?? '').replaceAll('_', ' ')}${p.rule_id ? ` by rule ${p.rule_id}` : ''}${p.reason ? `: ${p.reason}` : ''}` };
  }
  if (k === 'episode.action_denied') {
    return { group: 'episode', bad: true, text: `${p.agent}'s ${p.action} in ${p.episode_id} denied${rule(p.decision)}: ${why(p.decision?.reason)}` };
  }
  if (k === 'domain.written') {
    const writer = p.by ? `${p.by} (${p.agent})` : p.agent;
    return { group: 'decision', bad: false, text: `${writer} wrote ${p.domain} version ${p.version}${rule(p.decision)}` };
  }
  if (k === 'domain.write_denied') {
    return { group: 'decision', bad: true, text: `${p.agent} may not write ${p.domain}${rule(p.decision)}: ${why(p.decision?.reason)}` };
  }
  if (k === 'run.blocked') {
    return { group: 'run', bad: true, text: `run blocked by ${p.rule_id}: ${why(p.reason)}` };
  }
  if (k === 'run.failed') return { group: 'run', bad: true, text: `run failed: ${why(p.reason)}` };
  if (k === 'run.cancelled') return { group: 'run', bad: true, text: `run cancelled by ${p.by}: ${why(p.reason)}` };
  if (k === 'run.completed') return { group: 'run', bad: false, text: 'run completed' };
  const bad = /denied|failed|refused|degraded/.test(k);
  return { group: 'other', bad, text: k.replaceAll('_', ' ') };
}

/** What a ticket asks, in words. */
export function asks(subject) {
  const s = subject ?? {};
  switch (s.type) {
    case 'question': return `${s.agent} asks: ${s.question}`;
    case 'retry': return `retry the failed call ${s.request_id}?`;
    case 'conflict': return `pick one of the conflicting outputs of ${s.group}`;
    case 'proceed': return `${s.agent}'s remaining actions wait for review (${(s.actions ?? []).length})`;
    case 'episode_review': return `${s.agent}'s episode ${s.episode_id}: ${s.asked} (${s.summary})`;
    case 'tool': return `${s.agent} asks to call the tool ${s.name} (matched ${s.pattern}, rule ${s.rule_id})`;
    case 'effect': return `side effect ${s.effect_id} waits for approval (${String(s.step ?? '').replaceAll('_', ' ')})`;
    default: return s.type ? s.type.replaceAll('_', ' ') : '';
  }
}
