/** Types of extract.mjs (plain JavaScript so that worker threads load it without a TypeScript loader). */

export interface DomNode {
  nodeType: number;
  nodeName: string;
  textContent: string | null;
  childNodes: ArrayLike<DomNode>;
}

/** The text of a DOM subtree, one paragraph per block, blank line between paragraphs. */
export function blocksToText(root: DomNode): string;

/** Title and main text of an HTML page. */
export function htmlToText(page: string): { title: string; text: string };
