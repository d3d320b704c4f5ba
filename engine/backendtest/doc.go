// Package backendtest is the conformance check for model.Backend
// implementations: Check runs every op family on fresh random inputs on a
// candidate backend and on engine/cpu (the oracle) and compares them
// (relative error, NaN never passing; integer results exactly, except at
// near-ties); CheckMLA does the same for the DeepSeek-V3 ops
// (model.MLABackend); CheckModel compares a whole model's logits. It imports
// testing and is meant for tests only.
package backendtest
