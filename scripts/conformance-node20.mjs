/**
 * Runs the official MCP conformance suite (@modelcontextprotocol/conformance 0.1.16, and 0.2.x as
 * `conformance-next`) on Node 20:
 *
 *   node --import ./scripts/conformance-node20.mjs node_modules/@modelcontextprotocol/conformance/dist/index.js …
 *
 * Why: its bundle imports `globSync` from "fs", which Node only has from 22, so on Node 20 it fails to
 * link before doing anything. This module-customization hook answers the bundle's "fs" import (and
 * only that one) with scripts/fs-globsync.mjs: node:fs plus a small globSync. node_modules stay as
 * installed. Remove this file and fs-globsync.mjs once the project runs on Node 22.
 */
import fs from 'node:fs';
import { register } from 'node:module';
import { isMainThread } from 'node:worker_threads';

// The hooks themselves run on a thread of their own, where this file is loaded again: register once.
if (isMainThread && typeof fs.globSync !== 'function') register(import.meta.url);

const shim = new URL('./fs-globsync.mjs', import.meta.url).href;

/** Node's resolve hook: "fs" imported from the conformance package resolves to the shim. */
export async function resolve(specifier, context, next) {
  if (
    (specifier === 'fs' || specifier === 'node:fs') &&
    (context.parentURL?.includes('/node_modules/@modelcontextprotocol/conformance/') ||
      // 0.2.x (both MCP eras), installed beside 0.1.16 under this alias.
      context.parentURL?.includes('/node_modules/conformance-next/'))
  ) {
    return { url: shim, shortCircuit: true };
  }
  return next(specifier, context);
}
