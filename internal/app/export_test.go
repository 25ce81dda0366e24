package app

// FluidMetadata is (*App).fluidMetadata, for tests.
var FluidMetadata = (*App).fluidMetadata
