"""The models of the live harness: loading a Hugging Face directory or a GGUF file, the catalogue
of official pairs, the model cache and its fetch, model names, tokenizer checks, random-weight
models of a real shape. Importing this package (not its ``load`` module) needs no torch.
"""
