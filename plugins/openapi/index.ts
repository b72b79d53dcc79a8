/**
 * openapi: the service's OpenAPI 3.1 description generated from its routes (`openapi-document`)
 * and interactive documentation pages (`openapi-docs`, Swagger UI). Stages document themselves
 * through `describeStage` in api.ts.
 */
import './builtin.ts';
import './gateway-stages.ts';
import docs from './docs.ts';
import document from './document.ts';

export default [document, docs];
