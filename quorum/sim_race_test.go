//go:build race

package quorum

// raceOn is set when the tests run with the race detector, which slows
// the simulation tenfold: TestSimulate then runs fewer seeds.
const raceOn = true

// subsetParallel is how many attempts TestEverySubset runs at once (see
// subsetTimeout).
const subsetParallel = 64
