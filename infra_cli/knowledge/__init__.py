"""The knowledge in validators/*.yaml, one typed loader per file (docs/ARCHITECTURE.md, "Knowledge is data").

Every loader reads through `reader.load`: parsed once per process (and skus.yaml also kept parsed in the
user's cache), and a broken file is one `knowledge.invalid` diagnostic naming the file, the line and the
fault, never a traceback. Nothing here imports azure, torch or jinja2: `infra validate` reads it all.
"""
