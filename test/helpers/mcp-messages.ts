/**
 * MCP client messages for property tests (fast-check): valid requests and notifications of every
 * vendored protocol version, and malformed ones, each made from a valid one by one change the
 * protocol forbids (params of another type, a required field missing, a field of the wrong type,
 * a name or URI too long, a bad id, a request sent as a notification or the other way round).
 */
import fc from 'fast-check';

export type Message = Record<string, unknown>;

const word = fc.stringMatching(/^[a-z][a-z0-9-]{0,15}$/);
/** Integers and strings: the protocol's RequestId and ProgressToken. */
const idLike = fc.oneof(fc.integer({ min: 0, max: 1e6 }), word);
const levels = ['debug', 'info', 'notice', 'warning', 'error', 'critical', 'alert', 'emergency'];

/** `_meta` with a progress token, sometimes: every request may carry one. */
const meta = fc.option(fc.record({ progressToken: idLike }), { nil: undefined });
const withMeta = <T extends Record<string, unknown>>(params: fc.Arbitrary<T>) =>
  fc.tuple(params, meta).map(([p, m]) => (m === undefined ? p : { ...p, _meta: m }));

/** Valid params of each client request method, as every vendored version defines it. */
export const requestParams: Record<string, fc.Arbitrary<Record<string, unknown>>> = {
  'tools/call': withMeta(
    fc.oneof(
      fc.record({ name: fc.constant('echo'), arguments: fc.record({ message: word }) }),
      fc.record({ name: fc.constant('get-sum'), arguments: fc.record({ a: fc.integer(), b: fc.integer() }) }),
    ),
  ),
  'tools/list': withMeta(fc.record({ cursor: word }, { requiredKeys: [] })),
  'resources/list': withMeta(fc.record({ cursor: word }, { requiredKeys: [] })),
  'resources/templates/list': withMeta(fc.record({})),
  'prompts/list': withMeta(fc.record({})),
  ping: withMeta(fc.record({})),
};

/** Valid params that the typed proxy's registry and policies let through to the server too. */
export const forwardedRequests = Object.keys(requestParams);

/** Requests the protocol defines with params the mutations below can break (not all reach a server). */
const checkedRequests: Record<string, fc.Arbitrary<Record<string, unknown>>> = {
  ...requestParams,
  'resources/read': withMeta(fc.record({ uri: word.map((w) => `demo://resource/static/document/${w}.md`) })),
  'resources/subscribe': withMeta(fc.record({ uri: word.map((w) => `demo://resource/${w}`) })),
  'resources/unsubscribe': withMeta(fc.record({ uri: word.map((w) => `demo://resource/${w}`) })),
  'prompts/get': withMeta(fc.record({ name: word, arguments: fc.dictionary(word, word, { maxKeys: 3 }) })),
  'logging/setLevel': withMeta(fc.record({ level: fc.constantFrom(...levels) })),
  'completion/complete': withMeta(
    fc.record({
      ref: fc.record({ type: fc.constant('ref/prompt'), name: word }),
      argument: fc.record({ name: word, value: word }),
    }),
  ),
  initialize: fc.record({
    protocolVersion: fc.constantFrom('2024-11-05', '2025-03-26', '2025-06-18', '2025-11-25'),
    capabilities: fc.constant({}),
    clientInfo: fc.record({ name: word, version: fc.constant('1.0.0') }),
  }),
};

/** Valid params of each client notification. */
export const notificationParams: Record<string, fc.Arbitrary<Record<string, unknown>>> = {
  'notifications/initialized': fc.constant({}),
  'notifications/roots/list_changed': fc.constant({}),
  'notifications/cancelled': fc.record({ requestId: idLike, reason: word }, { requiredKeys: ['requestId'] }),
  'notifications/progress': fc.record(
    { progressToken: idLike, progress: fc.integer({ min: 0, max: 100 }), total: fc.constant(100) },
    { requiredKeys: ['progressToken', 'progress'] },
  ),
};

/** Notifications the stdio upstream forwards as they are (cancellations and progress are scoped first). */
export const forwardedNotifications = ['notifications/initialized', 'notifications/roots/list_changed'];

let counter = 0;
const nextId = () => `req-${++counter}`;

function request(method: string, params: Record<string, unknown>): Message {
  return { jsonrpc: '2.0', id: nextId(), method, params };
}

/** A valid request (of `methods`) or notification (of `notifications`). */
export function validMessage(
  methods: readonly string[] = Object.keys(checkedRequests),
  notifications: readonly string[] = Object.keys(notificationParams),
): fc.Arbitrary<Message> {
  const requests = methods.map((m) =>
    (checkedRequests[m] as fc.Arbitrary<Record<string, unknown>>).map((p) => request(m, p)),
  );
  const notes = notifications.map((m) =>
    (notificationParams[m] as fc.Arbitrary<Record<string, unknown>>).map((params) => ({
      jsonrpc: '2.0',
      method: m,
      params,
    })),
  );
  return fc.oneof(...requests, ...notes);
}

/** Anything but a JSON object. */
const notObject = fc.oneof(fc.array(fc.oneof(fc.integer(), word), { maxLength: 4 }), word, fc.integer(), fc.boolean());
/** Anything but a string. */
const notString = fc.oneof(
  fc.integer(),
  fc.boolean(),
  fc.constant(null),
  fc.array(word, { maxLength: 3 }),
  fc.dictionary(word, word, { maxKeys: 2 }),
);
/** Anything but a string or an integer (RequestId, ProgressToken); 1.5 and 1e400 (Infinity) too. */
const notIdLike = fc.oneof(
  fc.boolean(),
  fc.constant(null),
  fc.array(fc.integer(), { maxLength: 3 }),
  fc.dictionary(word, word, { maxKeys: 2 }),
  fc.double({ noNaN: true, noDefaultInfinity: true }).filter((d) => !Number.isInteger(d)),
  fc.constant('1e400'), // marked: written into the JSON as the number literal 1e400
);

/** Where each checked method keeps its required fields and typed fields. */
const required: Record<string, string[][]> = {
  'tools/call': [['params'], ['params', 'name']],
  'resources/read': [['params'], ['params', 'uri']],
  'resources/subscribe': [['params'], ['params', 'uri']],
  'resources/unsubscribe': [['params'], ['params', 'uri']],
  'prompts/get': [['params'], ['params', 'name']],
  'logging/setLevel': [['params'], ['params', 'level']],
  'completion/complete': [
    ['params'],
    ['params', 'ref'],
    ['params', 'argument'],
    ['params', 'ref', 'type'],
    ['params', 'argument', 'value'],
  ],
  initialize: [
    ['params'],
    ['params', 'protocolVersion'],
    ['params', 'capabilities'],
    ['params', 'clientInfo'],
    ['params', 'clientInfo', 'name'],
  ],
  // requestId is optional since 2025-11-25 (a task's cancellation names no request)
  'notifications/cancelled': [['params']],
  'notifications/progress': [['params'], ['params', 'progressToken'], ['params', 'progress']],
};

const stringFields: Record<string, string[][]> = {
  'tools/call': [['params', 'name']],
  'tools/list': [['params', 'cursor']],
  'resources/list': [['params', 'cursor']],
  'resources/read': [['params', 'uri']],
  'resources/subscribe': [['params', 'uri']],
  'prompts/get': [['params', 'name']],
  'completion/complete': [
    ['params', 'ref', 'name'],
    ['params', 'argument', 'name'],
    ['params', 'argument', 'value'],
  ],
  initialize: [
    ['params', 'protocolVersion'],
    ['params', 'clientInfo', 'name'],
  ],
  'notifications/cancelled': [['params', 'reason']],
};

const objectFields: Record<string, string[][]> = {
  'tools/call': [['params', 'arguments']],
  'prompts/get': [['params', 'arguments']],
  initialize: [
    ['params', 'capabilities'],
    ['params', 'clientInfo'],
  ],
  'completion/complete': [
    ['params', 'ref'],
    ['params', 'argument'],
  ],
};

function clone(m: Message): Message {
  return structuredClone(m);
}

function setAt(m: Message, path: string[], value: unknown): Message {
  const out = clone(m);
  let node = out as Record<string, unknown>;
  for (const key of path.slice(0, -1)) {
    if (typeof node[key] !== 'object' || node[key] === null) node[key] = {};
    node = node[key] as Record<string, unknown>;
  }
  node[path[path.length - 1] as string] = value;
  return out;
}

function removeAt(m: Message, path: string[]): Message {
  const out = clone(m);
  let node = out as Record<string, unknown>;
  for (const key of path.slice(0, -1)) node = node[key] as Record<string, unknown>;
  delete node[path[path.length - 1] as string];
  return out;
}

function mutations(m: Message): Array<fc.Arbitrary<Message>> {
  const method = m.method as string;
  const isRequest = 'id' in m;
  const out: Array<fc.Arbitrary<Message>> = [
    // params of another type than an object
    notObject.map((p) => setAt(m, ['params'], p)),
  ];
  for (const path of required[method] ?? []) out.push(fc.constant(removeAt(m, path)));
  for (const path of stringFields[method] ?? []) out.push(notString.map((v) => setAt(m, path, v)));
  for (const path of objectFields[method] ?? []) out.push(notObject.map((v) => setAt(m, path, v)));
  if (method === 'logging/setLevel') {
    out.push(word.filter((w) => !levels.includes(w)).map((w) => setAt(m, ['params', 'level'], w)));
  }
  if (method === 'completion/complete') {
    out.push(word.map((w) => setAt(m, ['params', 'ref', 'type'], `ref/${w}x`)));
  }
  if (method === 'tools/call' || method === 'prompts/get') {
    // names beyond the protocol's 128 characters, and the empty name
    out.push(fc.integer({ min: 129, max: 4096 }).map((n) => setAt(m, ['params', 'name'], 'n'.repeat(n))));
    out.push(fc.constant(setAt(m, ['params', 'name'], '')));
  }
  if (method.startsWith('resources/') && method !== 'resources/list' && method !== 'resources/templates/list') {
    out.push(fc.integer({ min: 8193, max: 20000 }).map((n) => setAt(m, ['params', 'uri'], `demo://${'u'.repeat(n)}`)));
    out.push(word.map((w) => setAt(m, ['params', 'uri'], `not a uri ${w}`)));
  }
  if (method === 'notifications/cancelled') out.push(notIdLike.map((v) => setAt(m, ['params', 'requestId'], v)));
  if (method === 'notifications/progress') {
    out.push(notIdLike.map((v) => setAt(m, ['params', 'progressToken'], v)));
    out.push(notString.map((v) => setAt(m, ['params', 'progress'], typeof v === 'number' ? String(v) : v)));
  }
  if (isRequest) {
    out.push(notIdLike.map((v) => setAt(m, ['params', '_meta'], { progressToken: v })));
    out.push(notObject.map((v) => setAt(m, ['params', '_meta'], v)));
    // an id that is not a string or an integer
    out.push(notIdLike.map((v) => ({ ...clone(m), id: v })));
    // a request sent as a notification
    out.push(fc.constant(removeAt(m, ['id'])));
  } else {
    // a notification sent with an id
    out.push(idLike.map((id) => ({ ...clone(m), id })));
  }
  return out;
}

/** A message the protocol forbids: a valid one with one change. */
export function malformedMessage(): fc.Arbitrary<Message> {
  return validMessage().chain((m) => fc.oneof(...mutations(m)));
}

/** JSON text of a message; the marker string '1e400' becomes the number literal (Infinity once parsed). */
export function toBody(m: Message): string {
  return JSON.stringify(m).replaceAll('"1e400"', '1e400');
}
