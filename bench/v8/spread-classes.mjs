/**
 * `node --allow-natives-syntax bench/v8/spread-classes.mjs`: what an object made by a spread costs
 * on this Node, against the same object written field by field (the baseline, same run). On Node
 * 20 (V8 11.3) a spread that adds a key its source lacks gives every object a hidden class of its
 * own once the site is warm: ~1–1.5 µs each, the classes in the old generation, reads of them
 * megamorphic (docs/architecture.md, "Process tuning"). Rerun on a new Node before relaxing the rule.
 *
 * Per shape: ns per object (median of BENCH_ROUNDS rounds of 200,000), its ratio to the written-out
 * object, and whether two objects of a warm site share their hidden class.
 */
const rounds = Number(process.env.BENCH_ROUNDS ?? 5);
const n = 200_000;
const natives = (() => {
  try {
    return new Function('a', 'b', 'return %HaveSameMap(a, b)');
  } catch {
    return undefined; // run without --allow-natives-syntax: no hidden-class check
  }
})();

const state = (i) => ({ limit: i, used: 2, remaining: 3, resetAt: 4, msLeft: 5, store: 'memory' });
const shapes = {
  'written out (baseline)': (s) => ({
    limit: s.limit,
    used: s.used,
    remaining: s.remaining,
    resetAt: s.resetAt,
    msLeft: s.msLeft,
    store: s.store,
    allowed: true,
  }),
  '{ ...s } alone': (s) => ({ ...s }),
  '{ ...s, limit } (overrides a key s has)': (s) => ({ ...s, limit: 1 }),
  '{ allowed, ...s } (key first)': (s) => ({ allowed: true, ...s }),
  'Object.assign({}, s, { allowed })': (s) => Object.assign({}, s, { allowed: true }),
  '{ ...s, allowed } (adds a key)': (s) => ({ ...s, allowed: true }),
  '{ ...s, ...{ allowed } }': (s) => ({ ...s, ...{ allowed: true } }),
  'const o = { ...s }; o.allowed = true': (s) => {
    const o = { ...s };
    o.allowed = true;
    return o;
  },
};

let sink;
const results = [];
for (const [name, make] of Object.entries(shapes)) {
  const times = [];
  for (let r = 0; r < rounds; r++) {
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < n; i++) sink = make(state(i));
    times.push(Number(process.hrtime.bigint() - t0) / n);
  }
  times.sort((a, b) => a - b);
  const a = make(state(1));
  const b = make(state(2));
  results.push({ name, ns: times[Math.floor(times.length / 2)], sameClass: natives ? natives(a, b) : undefined });
}
void sink;
const base = results[0].ns;
console.log(`Node ${process.version}: ns per object (median of ${rounds} rounds of ${n}), ratio to written out`);
for (const r of results) {
  const same = r.sameClass === undefined ? '' : r.sameClass ? '  one class' : '  A CLASS PER OBJECT';
  console.log(`${r.ns.toFixed(0).padStart(7)} ns  ${(r.ns / base).toFixed(2).padStart(6)}×  ${r.name}${same}`);
}
