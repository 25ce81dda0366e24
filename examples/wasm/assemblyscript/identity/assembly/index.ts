// identity: a streamd transform that passes every record on unchanged by
// answering KEEP. The cheapest possible plugin, for benchmarking the ABI.
import { transform, Record, Output } from "@streamd/sdk";
export { streamd_abi_v1, streamd_buffer, streamd_manifest, streamd_init, streamd_process } from "@streamd/sdk";

function identity(rec: Record, out: Output): void {
  out.keep();
}

transform("identity", "1.0.0", identity);
