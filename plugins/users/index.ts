/**
 * users: accounts and bearer tokens for any service. The `user-directory` resource (entity store,
 * scrypt, HS256 tokens) and the stages `user-create`, `user-token` (OAuth2 password flow, login
 * throttling), `user-current`, `user-activation` and `user-guard`.
 */
import resource from './resource.ts';
import { userActivation, userCreate, userCurrent, userGuard, userToken } from './stage.ts';

export default [resource, userCreate, userToken, userCurrent, userActivation, userGuard];
