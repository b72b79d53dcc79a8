import { DETECTORS } from './plugins/classify/patterns/catalog.ts';
import { TextView } from './plugins/classify/patterns/detector.ts';
import { PatternClassifier } from './plugins/classify/patterns/classifier.ts';
const system = 'You are a helpful assistant for a travel agency. '.repeat(20);
const user = 'Could you suggest a three day itinerary for Lisbon in spring, with museums, food and a day trip? '.repeat(10);
const text = `${system}\n${user}`;
const ds = DETECTORS.filter((d) => d.family === 'secrets');
const time = (f: () => void, n = 3000) => { for (let i = 0; i < 300; i++) f(); const t = performance.now(); for (let i = 0; i < n; i++) f(); return ((performance.now() - t) / n) * 1000; };
const groups: Record<string, typeof ds> = {};
for (const d of ds) { const g = d.pendingFrom ? 'keys' : d.id; (groups[g] ??= []).push(d); }
for (const [g, list] of Object.entries(groups)) {
  console.log(g, time(() => { const v = new TextView(text); for (const d of list) d.find(v); }).toFixed(2));
}
const c = new PatternClassifier({ name: 's', type: 'pattern', detectors: ['secrets'] });
console.log('classifier', time(() => c.classifySync(text)).toFixed(2));
console.log('all finds', time(() => { const v = new TextView(text); for (const d of ds) d.find(v); }).toFixed(2));
