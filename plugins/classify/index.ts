/**
 * classify: the `classifier-set` resource (Tier A pattern and Tier B ML classifiers) and the
 * `classify` stage that runs them on a request. Contract for other plugins: api.ts.
 */
import resource from './resource.ts';
import stage from './stage.ts';

export default [resource, stage];
