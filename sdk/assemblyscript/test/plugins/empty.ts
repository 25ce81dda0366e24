// Registers nothing: streamd_manifest must fail with ERR_INTERNAL.
export { streamd_abi_v1, streamd_buffer, streamd_manifest, streamd_init, streamd_process } from "../../index";
