/**
 * HTML to clean text: Mozilla Readability (Firefox's reader view) on a linkedom DOM finds the
 * main content and drops navigation, sidebars, footers and ads; the result is written out one
 * paragraph per block element, whitespace collapsed. A page Readability finds no article in (a
 * short page, a list page) falls back to the body without its obvious boilerplate elements.
 *
 * Plain JavaScript (types in extract.d.mts): it runs in extraction worker threads, which load it
 * without the TypeScript loader (see extract-worker.mjs).
 */
import { Readability } from '@mozilla/readability';
import { parseHTML } from 'linkedom';

/** Elements that end a paragraph: their content becomes its own block of text. */
const blockElements = new Set([
  'address',
  'article',
  'aside',
  'blockquote',
  'br',
  'dd',
  'details',
  'div',
  'dl',
  'dt',
  'figcaption',
  'figure',
  'footer',
  'form',
  'h1',
  'h2',
  'h3',
  'h4',
  'h5',
  'h6',
  'header',
  'hr',
  'li',
  'main',
  'nav',
  'ol',
  'p',
  'pre',
  'section',
  'summary',
  'table',
  'tbody',
  'td',
  'tfoot',
  'th',
  'thead',
  'tr',
  'ul',
]);

/** Never text: code, styles, embedded objects. */
const skippedElements = new Set(['script', 'style', 'noscript', 'template', 'svg', 'math', 'head', 'iframe', 'object']);

/** Removed before the fallback extraction: page furniture rather than content. */
const boilerplate = 'nav, header, footer, aside, form, button, dialog, [role="navigation"], [aria-hidden="true"]';

/**
 * The text of a DOM subtree, one paragraph per block, blank line between paragraphs. Iterative
 * (an explicit stack), so a deeply nested page cannot overflow the call stack.
 */
/** @param {import('./extract.d.mts').DomNode} root */
export function blocksToText(root) {
  /** @type {string[]} */
  const paragraphs = [];
  let current = '';
  const flush = () => {
    const text = current.replace(/[ \t\r\n\f\u00a0]+/g, ' ').trim();
    if (text) paragraphs.push(text);
    current = '';
  };
  // Entries are nodes to visit, or `null` marking the end of a block element.
  /** @type {Array<import('./extract.d.mts').DomNode | null>} */
  const stack = [root];
  while (stack.length > 0) {
    const node = stack.pop();
    if (node === null) {
      flush();
      continue;
    }
    if (node === undefined) break;
    if (node.nodeType === 3) {
      current += node.textContent ?? '';
      continue;
    }
    if (node.nodeType !== 1 && node.nodeType !== 9 && node.nodeType !== 11) continue;
    const name = node.nodeName.toLowerCase();
    if (skippedElements.has(name)) continue;
    if (name === 'pre') {
      flush();
      const text = (node.textContent ?? '').replace(/^\n+|\s+$/g, '');
      if (text) paragraphs.push(text);
      continue;
    }
    const block = blockElements.has(name);
    if (block) {
      flush();
      stack.push(null);
    } else if (name === 'img' || name === 'input') {
      continue;
    }
    const children = node.childNodes;
    for (let i = children.length - 1; i >= 0; i--) stack.push(children[i]);
  }
  flush();
  return paragraphs.join('\n\n');
}

/** Title and main text of an HTML page. */
/** @param {string} page */
export function htmlToText(page) {
  // linkedom builds no <html>/<body> around a bare fragment; the browser parser would.
  const html = /<html[\s>]/i.test(page) ? page : `<!doctype html><html><body>${page}</body></html>`;
  const { document } = parseHTML(html);
  const pageTitle = (document.title ?? '').replace(/\s+/g, ' ').trim();
  // Readability mutates the document it reads: the fallback parses the page again.
  const article = new Readability(document, { charThreshold: 200 }).parse();
  let title = pageTitle;
  let body = '';
  if (article?.content) {
    title = article.title?.replace(/\s+/g, ' ').trim() || pageTitle;
    body = blocksToText(parseHTML(`<!doctype html><html><body>${article.content}</body></html>`).document);
  }
  if (!body) {
    const fresh = parseHTML(html).document;
    for (const el of fresh.querySelectorAll(boilerplate)) el.remove();
    body = blocksToText(fresh.body ?? fresh);
  }
  // Readability keeps or drops the <h1> depending on the page; the title is written once, first.
  const text = title && !body.startsWith(title) ? (body ? `${title}\n\n${body}` : title) : body;
  return { title, text };
}
