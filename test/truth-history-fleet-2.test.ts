// The fleet history campaign, second half (seeds 1001–2000 by default): see
// test/support/history/fleet-suite.ts. It runs beside the first half, on the other core.
import { defineFleetCampaign } from './support/history/fleet-suite.js';

defineFleetCampaign(2);
