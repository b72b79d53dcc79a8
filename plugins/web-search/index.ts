/**
 * web-search: a meta-search backend as a resource (resource.ts) and a stage that runs a request's
 * query through it (stage.ts).
 */
import { webSearchResource } from './resource.ts';
import { webSearchStage } from './stage.ts';

export default [webSearchResource, webSearchStage];
