/**
 * The prefilter of the phrase detectors. A phrase match starts at the beginning of a word of the
 * normalized text with one of a few word sequences, its leads (`ignore`, `you are`, `assistant
 * with`...; phrases.ts derives them from each phrase), the space between two words optional as in
 * the phrase. A trie of all leads is walked from each word start (normalize.ts does it while it
 * builds the text) and lists, per phrase group, the word starts where one of its leads is; the
 * group's regex then runs at those positions only. Ordinary text has few.
 *
 * The walk is a chain of dependent loads, one per letter, so the table is laid out for it: a row
 * of 32 entries per node (a-z), nodes numbered breadth-first (the rows walked most lie together),
 * and each entry the child's row offset (node × 32) with its flags in the low bits, so that one
 * load per letter does.
 */

const SPACE = 0x20;
const A = 0x61;
/** Entries (row offset | flags): where no lead goes on (all its entries lead back to it), and a word start. */
export const DEAD = 0;
export const ROOT = 32;
/** Entry flags: a lead ends at the node; a lead has a word boundary there (a space may follow). */
export const END = 1;
export const BOUNDARY = 2;
/** An entry's row offset. */
export const ROW = ~31;

interface TrieNode {
  children: Map<number, TrieNode>;
  flags: number;
  groups: number[];
}

const newNode = (): TrieNode => ({ children: new Map(), flags: 0, groups: [] });

export class LeadIndex {
  #root = newNode();
  #groupCount = 0;
  #rows = new Int32Array(64);
  #nodes = 2;
  /** Per node number: the groups with a lead ending there. */
  #groups: number[][] = [[], []];

  /** Registers a group by its leads (sequences of lower-case words); returns its id. */
  addGroup(leads: readonly (readonly string[])[]): number {
    const id = this.#groupCount++;
    for (const lead of leads) {
      let node = this.#root;
      lead.forEach((word, w) => {
        if (!/^[a-z]+$/.test(word)) throw new Error(`lead word "${word}" is not lower-case letters`);
        if (w > 0) node.flags |= BOUNDARY;
        for (let i = 0; i < word.length; i++) {
          const letter = word.charCodeAt(i) - A;
          let child = node.children.get(letter);
          if (child === undefined) {
            child = newNode();
            node.children.set(letter, child);
          }
          node = child;
        }
      });
      if (node === this.#root) throw new Error('empty lead');
      if (!node.groups.includes(id)) node.groups.push(id);
      node.flags |= END;
    }
    this.#compile();
    return id;
  }

  get groupCount(): number {
    return this.#groupCount;
  }

  get nodeCount(): number {
    return this.#nodes;
  }

  /** 32 entries per node, at its row offset + letter (0-25): the child's entry. */
  get rows(): Int32Array {
    return this.#rows;
  }

  /**
   * Goes on with a walk through `text` (normalized) from `at`, at `entry`, adding to `hits` a pair
   * (start, entry) at each lead it completes. A space is passed where a lead has a word boundary.
   */
  walk(text: string, start: number, entry: number, at: number, hits: number[]): void {
    const rows = this.#rows;
    for (let i = at; i < text.length; i++) {
      const c = text.charCodeAt(i);
      if (c === SPACE) {
        if ((entry & BOUNDARY) === 0) return;
        continue;
      }
      entry = rows[(entry & ROW) + c - A];
      if (entry === DEAD) return;
      if ((entry & END) !== 0) hits.push(start, entry);
    }
  }

  /** Hits of a normalized text, the plain way: a walk from every word start. */
  scan(text: string): number[] {
    const hits: number[] = [];
    for (let start = 0; start < text.length; ) {
      this.walk(text, start, ROOT, start, hits);
      const space = text.indexOf(' ', start);
      if (space === -1) break;
      start = space + 1;
    }
    return hits;
  }

  /** For each group, the word starts among the hits where one of its leads is, ascending, once each. */
  byGroup(hits: readonly number[]): Array<number[] | undefined> {
    const byGroup: Array<number[] | undefined> = new Array(this.#groupCount);
    let sorted = true;
    for (let h = 0; h < hits.length; h += 2) {
      const start = hits[h];
      for (const g of this.#groups[hits[h + 1] >> 5]) {
        const starts = byGroup[g];
        if (starts === undefined) byGroup[g] = [start];
        else if (starts[starts.length - 1] !== start) {
          if (start < starts[starts.length - 1]) sorted = false;
          starts.push(start);
        }
      }
    }
    if (!sorted) {
      // Walks of several words resume after the text is built, so their hits come late.
      for (const [g, starts] of byGroup.entries()) {
        if (starts !== undefined) byGroup[g] = [...new Set(starts)].sort((a, b) => a - b);
      }
    }
    return byGroup;
  }

  /** The tables from the trie: node 0 dead, node 1 the root, then breadth-first. */
  #compile(): void {
    const order: TrieNode[] = [newNode(), this.#root];
    for (let i = 1; i < order.length; i++) order.push(...order[i].children.values());
    const number = new Map(order.map((node, i) => [node, i]));
    this.#nodes = order.length;
    this.#rows = new Int32Array(order.length * 32);
    this.#groups = order.map((node) => node.groups);
    order.forEach((node, i) => {
      for (const [letter, child] of node.children)
        this.#rows[i * 32 + letter] = (number.get(child)! * 32) | child.flags;
    });
    if (this.#root.flags !== 0) throw new Error('a lead of no letters');
  }
}

/** The leads of every phrase group of the phrase detectors (phrases.ts fills it). */
export const PHRASE_LEADS = new LeadIndex();
