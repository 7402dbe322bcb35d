"""Placeholder for your Lightning training script (stacks/lightning-per-node.yaml points `code` here)."""

if __name__ == "__main__":
    print("replace stacks/src/train.py with your training script")
