/**
 * A fixture OAuth 2.1 authorization server that issues real signed tokens: RFC 8414 metadata, a
 * JWKS, and a token endpoint for the client_credentials grant (client_secret_basic or _post) that
 * puts the RFC 8707 `resource` in the token's audience. `mint` signs any claims, for the tokens a
 * real server would never issue (expired, another audience, another key, `alg: none`).
 * `clients` registers more clients, each with the scopes it may be granted (a request for another
 * is refused with `invalid_scope`, RFC 6749 §5.2); the default client may get any scope.
 * `down` makes it answer 503 to everything (`'all'`) or to its key set only (`'jwks'`); `paths`
 * records the path of every request it received, whatever it answered.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, type JWTPayload, SignJWT } from 'jose';

export interface OAuthServer {
  issuer: string;
  clientId: string;
  clientSecret: string;
  /** Tokens issued by the token endpoint, newest last. */
  issued: string[];
  /** What answers 503 (an outage): nothing (false), everything, or the key set only. */
  down: false | 'all' | 'jwks';
  /** The path of every request received, in order. */
  paths: string[];
  mint(claims: JWTPayload, o?: { key?: 'own' | 'other'; kid?: string }): Promise<string>;
  close(): Promise<void>;
}

export interface OAuthClient {
  secret: string;
  /** The scopes this client may be granted (default: any). */
  scopes?: string[];
}

export async function startOAuthServer(o: { clients?: Record<string, OAuthClient> } = {}): Promise<OAuthServer> {
  const own = await generateKeyPair('RS256');
  const other = await generateKeyPair('RS256');
  const jwk = { ...(await exportJWK(own.publicKey)), kid: 'key-1', alg: 'RS256', use: 'sig' };
  const clientId = 'test-client';
  const clientSecret = 'test-secret';
  const clients: Record<string, OAuthClient> = { [clientId]: { secret: clientSecret }, ...o.clients };
  const issued: string[] = [];
  let issuer = '';
  const state: { down: OAuthServer['down']; paths: string[] } = { down: false, paths: [] };

  const mint: OAuthServer['mint'] = (claims, o = {}) =>
    new SignJWT(claims)
      .setProtectedHeader({ alg: 'RS256', kid: o.kid ?? 'key-1', typ: 'at+jwt' })
      .sign(o.key === 'other' ? other.privateKey : own.privateKey);

  const server: Server = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => {
      body += c;
    });
    req.on('end', async () => {
      const json = (status: number, value: unknown) => {
        res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store' });
        res.end(JSON.stringify(value));
      };
      const url = new URL(req.url ?? '/', issuer);
      state.paths.push(url.pathname);
      if (state.down === 'all' || (state.down === 'jwks' && url.pathname === '/jwks')) {
        return json(503, { error: 'temporarily_unavailable' });
      }
      if (req.method === 'GET' && url.pathname === '/.well-known/oauth-authorization-server') {
        return json(200, {
          issuer,
          authorization_endpoint: `${issuer}/authorize`,
          token_endpoint: `${issuer}/token`,
          jwks_uri: `${issuer}/jwks`,
          grant_types_supported: ['client_credentials'],
          token_endpoint_auth_methods_supported: ['client_secret_basic', 'client_secret_post'],
          response_types_supported: ['code'],
          code_challenge_methods_supported: ['S256'],
        });
      }
      if (req.method === 'GET' && url.pathname === '/jwks') return json(200, { keys: [jwk] });
      if (req.method === 'POST' && url.pathname === '/token') {
        const form = new URLSearchParams(body);
        let id = form.get('client_id');
        let secret = form.get('client_secret');
        const basic = /^Basic (.+)$/.exec(req.headers.authorization ?? '');
        if (basic) [id, secret] = Buffer.from(basic[1], 'base64').toString().split(':').map(decodeURIComponent);
        const client = id ? clients[id] : undefined;
        if (!client || secret !== client.secret) return json(401, { error: 'invalid_client' });
        if (form.get('grant_type') !== 'client_credentials') return json(400, { error: 'unsupported_grant_type' });
        const resource = form.get('resource');
        if (!resource) return json(400, { error: 'invalid_target' });
        const scope = form.get('scope') ?? '';
        const refused = scope.split(' ').filter((s) => s && client.scopes && !client.scopes.includes(s));
        if (refused.length > 0) return json(400, { error: 'invalid_scope', error_description: refused.join(' ') });
        const now = Math.floor(Date.now() / 1000);
        const token = await mint({
          iss: issuer,
          sub: `client:${id}`,
          aud: resource,
          client_id: id,
          scope,
          iat: now,
          exp: now + 300,
        });
        issued.push(token);
        return json(200, { access_token: token, token_type: 'Bearer', expires_in: 300, scope });
      }
      json(404, { error: 'not_found' });
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    issuer,
    clientId,
    clientSecret,
    issued,
    get down() {
      return state.down;
    },
    set down(v) {
      state.down = v;
    },
    paths: state.paths,
    mint,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}
