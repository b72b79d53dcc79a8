/**
 * A failure reason fit for an unauthenticated endpoint (`/health`, `/health/ready`): what is
 * down and why, never where. URLs, IP addresses and `host:port` pairs in the text (an error
 * message of a library may quote them) are replaced; the operator finds them in the admin
 * listener's health (`GET /admin/health`) and in the logs.
 */
const url = /\b[a-z][a-z0-9+.-]*:\/\/[^\s;,'"()<>]+/gi;
const bracketed = /\[[0-9a-f:.%a-z]+\](?::\d{1,5})?/gi;
const ipv4 = /\b\d{1,3}(?:\.\d{1,3}){3}(?::\d{1,5})?\b/g;
const hostPort = /\b[a-z0-9](?:[a-z0-9-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)*:\d{1,5}\b/gi;

export function publicReason(text: string): string {
  return text
    .replace(url, '<url>')
    .replace(bracketed, '<address>')
    .replace(ipv4, '<address>')
    .replace(hostPort, '<address>');
}
