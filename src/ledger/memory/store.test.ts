import { ledgerContractSuite } from '../contract.case.js';
import { openMemoryLedger } from './store.js';

ledgerContractSuite('memory', () => Promise.resolve({ store: openMemoryLedger() }));
