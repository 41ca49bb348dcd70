// The fleet history campaign, first half (seeds 1–1000 by default): see
// test/support/history/fleet-suite.ts. The second half is truth-history-fleet-2.test.ts.
import { defineFleetCampaign } from './support/history/fleet-suite.js';

defineFleetCampaign(1);
