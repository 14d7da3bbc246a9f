// The runtime types live in the settlement room now; dashboard/ (another engineer's) still imports them from here.
export type { FacilitatorContext, NetworkRuntime, RelayerSafety } from "../settlement/runtime.js";
export { FacilitatorFault, PayerQuotaExceeded } from "../settlement/runtime.js";
