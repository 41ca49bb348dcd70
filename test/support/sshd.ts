// The SSH fixture moved to src/fakes/sshd.ts (published with the fakes); kept here for the suites.
export * from '../../src/fakes/sshd.js';
