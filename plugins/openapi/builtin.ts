/**
 * Describers of the runtime's generic probe stages, which know nothing of OpenAPI themselves.
 */
import { describeStage, jsonResponse } from './api.ts';

const status = { type: 'object', properties: { status: { type: 'string' } } };

describeStage('health', () => ({
  operation: {
    tags: ['health'],
    summary: 'Health check',
    responses: { 200: jsonResponse('The process is up', status) },
  },
}));

describeStage('readiness', () => ({
  operation: {
    tags: ['health'],
    summary: 'Readiness check',
    description: 'Checks the database (and other dependencies): 200 when reachable, 503 when not.',
    responses: { 200: jsonResponse('Ready', status), 503: jsonResponse('Not ready', status) },
  },
}));
