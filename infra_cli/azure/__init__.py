"""The one provider: real azure-ai-ml / azure-mgmt-compute clients, for Azure or the local emulator."""
