/**
 * `serve --watch`: reload a service when its config file, or any file in the config file's
 * directory tree (registries, policies, tenant files...), changes. Changes are debounced (an
 * editor's save is several events; a `git checkout` is many) and the reload is the same
 * transaction as `POST /admin/reload`.
 *
 * fs.watch with `recursive` where the platform has it (Linux, macOS, Windows on Node 20); else
 * the config file alone is polled once a second. Files the gateway or an editor writes next to
 * the config are ignored, so they never trigger a reload loop: dot files and directories, editor
 * backups and swap files, logs, SQLite databases and their journals, node_modules.
 */
import { type FSWatcher, type Stats, unwatchFile, watch, watchFile } from 'node:fs';
import { basename, dirname } from 'node:path';

export interface ConfigWatcher {
  /** `recursive`: the directory tree is watched; `poll`: only the config file, polled. */
  readonly mode: 'recursive' | 'poll';
  close(): void;
}

export interface WatchOptions {
  /** Quiet time after the last change before `onChange` runs (default 300 ms). */
  debounceMs?: number;
  /** Polling interval when recursive watching is unavailable (default 1000 ms). */
  pollMs?: number;
  /** Told when the watcher fails (e.g. the directory was removed). */
  onError?: (err: Error) => void;
}

// Any dot or node_modules path segment; backups (`~`); vim's write test file (4913); swap, temp,
// log and pid files (a `logging.file` next to the config would otherwise reload on every line);
// SQLite databases and their -wal/-shm/-journal files.
const ignored =
  /(^|[\\/])(\.[^\\/]*|node_modules)([\\/]|$)|~$|(^|[\\/])4913$|\.(swp|swx|swo|tmp|bak|log|pid|db|sqlite|sqlite3)$|\.log\.\d+$|-(wal|shm|journal)$/i;

/** True for a path (relative to the watched directory) whose changes never trigger a reload. */
export function isIgnoredChange(relativePath: string): boolean {
  return ignored.test(relativePath);
}

/** Calls `onChange` with the (last) changed path, relative to the config's directory. */
export function watchConfig(
  file: string,
  onChange: (changed: string) => void,
  options: WatchOptions = {},
): ConfigWatcher {
  const debounceMs = options.debounceMs ?? 300;
  let timer: NodeJS.Timeout | undefined;
  let last = basename(file);
  const changed = (name: string) => {
    if (isIgnoredChange(name)) return;
    last = name;
    clearTimeout(timer);
    timer = setTimeout(() => onChange(last), debounceMs);
  };

  let watcher: FSWatcher | undefined;
  try {
    watcher = watch(dirname(file), { recursive: true, persistent: false }, (_event, name) =>
      changed(name ? String(name) : basename(file)),
    );
  } catch {
    // ERR_FEATURE_UNAVAILABLE_ON_PLATFORM: poll the file instead (below).
  }
  if (watcher) {
    watcher.on('error', (err) => options.onError?.(err));
    const w = watcher;
    return {
      mode: 'recursive',
      close() {
        clearTimeout(timer);
        w.close();
      },
    };
  }
  const poll = (now: Stats, before: Stats) => {
    if (now.mtimeMs !== before.mtimeMs || now.size !== before.size || now.ino !== before.ino) changed(basename(file));
  };
  watchFile(file, { interval: options.pollMs ?? 1000, persistent: false }, poll);
  return {
    mode: 'poll',
    close() {
      clearTimeout(timer);
      unwatchFile(file, poll);
    },
  };
}
