// Package safetensors reads Hugging Face safetensors checkpoints: the
// 8-byte header length, the JSON header (dtype, shape, data offsets of
// every tensor, optional __metadata__), and the tensors' bytes, from one
// file or from a sharded checkpoint with model.safetensors.index.json.
// Every structural problem is a *FormatError naming the file and what is
// wrong; tensors are read on demand, so a checkpoint is never loaded whole.
package safetensors
