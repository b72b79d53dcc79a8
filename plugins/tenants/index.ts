/**
 * tenants: the `tenant-directory` resource (tenants from a file or inline, looked up by API key)
 * and the `tenant-auth` stage (the API key of a request selects its tenant). Contract for other
 * plugins: api.ts. See docs/tenants.md.
 */
import stage from './auth.ts';
import resource from './resource.ts';

export default [resource, stage];
