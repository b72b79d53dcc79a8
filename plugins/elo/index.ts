/**
 * elo: pairwise outcomes and ratings. `elo-outcome` records an outcome (Elo update, bandit
 * state, the outcome record, one transaction), `bandit-outcome` updates the bandit state alone,
 * `elo-leaderboard` ranks entities by Elo or by Bradley–Terry with bootstrap intervals.
 */
import { eloLeaderboard } from './leaderboard.ts';
import { banditOutcome, eloOutcome } from './outcome.ts';

export default [eloOutcome, banditOutcome, eloLeaderboard];
