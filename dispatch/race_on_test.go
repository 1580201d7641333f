//go:build race

package dispatch

// raceBuild reports whether the tests run under the race detector, which changes how
// many allocations a call makes.
const raceBuild = true
