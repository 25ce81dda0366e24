// Package entry for asc, which resolves `import ... from "@streamd/sdk"` to
// node_modules/@streamd/sdk/index.ts. The SDK lives in assembly/index.ts.
export * from "./assembly/index";
