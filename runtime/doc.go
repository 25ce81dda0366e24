// Package runtime is the WebAssembly plugin host of streamd: it loads a
// plugin that speaks host ABI v1 (docs/abi.md) with wazero, checks its
// exports and manifest, keeps a pool of sandboxed instances, and moves
// record batches in and out of guest memory.
//
// A Host owns the compilation caches; Host.Load returns a Module, whose Call
// runs one batch on a free instance. An instance that traps, times out or
// answers nonsense is thrown away and replaced; calls on one instance never
// overlap. Host.LoadWatched returns a Watched module that reloads the file
// when it changes, swapping modules between batches.
//
// Guests run in wazero's compiler mode with their memory capped, no
// environment, arguments or network, a fake clock unless the clock is
// granted (plugins.Options.Clock), random bytes from crypto/rand, and no
// files unless directories are granted (plugins.Options.Dirs, confined to
// them by runtime/internal/rootfs); their stdout and stderr go to the
// logger under the plugin's name. docs/abi.md section 11 says exactly what
// a guest gets.
package runtime
