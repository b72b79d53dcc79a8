/**
 * pairing: suggest the next pair of entities to compare (UCB bandit, or content similarity by
 * TF-IDF or an embedding resource).
 */
import stage from './stage.ts';

export default stage;
