"""Azure's edge: the one Provider interface the engines read and write through, over the real azure-ai-ml /
azure-mgmt-compute clients. It knows nothing of the emulator: the commands point the same clients at it."""
