/**
 * Loaded into every Node process a test starts (vitest.config.ts puts it in NODE_OPTIONS): the
 * process ends when the process that started it is gone, so a test run that is killed (a CI
 * timeout, Ctrl-C) leaves no service, cluster or stdio child holding ports behind it. Test-only:
 * a deployed gateway never loads it.
 */
import { readFileSync } from 'node:fs';

// Read once at start by Node: it does not change when the parent dies. A parent gone before this
// ran leaves init (1) here: no process a test starts has init as its parent.
const parent = process.ppid;

/** The parent's pid now (Linux: from /proc, where an orphan shows its new parent), else whether it still exists. */
function orphaned() {
  if (parent === 1) return true;
  try {
    const stat = readFileSync('/proc/self/stat', 'utf8');
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) !== parent;
  } catch {
    try {
      process.kill(parent, 0);
      return false;
    } catch {
      return true;
    }
  }
}

setInterval(() => {
  if (orphaned()) process.exit(1);
}, 1000).unref();
