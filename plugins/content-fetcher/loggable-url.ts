/**
 * A URL as it may be written to logs and error messages: scheme, host, port and path only. Query
 * strings carry tokens (`?access_token=`), fragments carry OAuth implicit-flow secrets, userinfo
 * carries passwords; none of them is needed to tell which page failed.
 */
export function loggableUrl(input: string | URL): string {
  let url: URL;
  try {
    url = typeof input === 'string' ? new URL(input) : new URL(input.href);
  } catch {
    // Not a URL: keep what precedes the first ?, # or @-credential, and not too much of it.
    return String(input)
      .split(/[?#]/)[0]
      .replace(/\/\/[^/@]*@/, '//')
      .slice(0, 200);
  }
  url.username = '';
  url.password = '';
  url.search = '';
  url.hash = '';
  return url.href;
}
