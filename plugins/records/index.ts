/**
 * records: typed records over the entity store. Two definitions: the `record-type` resource (an
 * entity type with declared fields: JSON shape, validation, schema) and the `record-api` stage
 * (FastAPI-style CRUD over it).
 */
import resource from './resource.ts';
import stage from './stage.ts';

export default [resource, stage];
