// Moved to test/helpers/ (split by concern). Kept for branches that still import `waitUntil` from here;
// remove once nothing does.
export { waitUntil } from "../helpers/time.js";
