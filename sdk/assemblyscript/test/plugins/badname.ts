// Registers an invalid name: instantiation must trap.
import { transform, Record, Output } from "../../index";
export { streamd_abi_v1, streamd_buffer, streamd_manifest, streamd_init, streamd_process } from "../../index";

function fn(rec: Record, out: Output): void {}

transform("Bad Name", "1", fn);
