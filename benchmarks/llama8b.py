"""The Llama-3.1-8B shape the benchmarks compile (transformers LlamaConfig keyword arguments)."""
LLAMA_8B = dict(vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_attention_heads=32,
                num_key_value_heads=8, max_position_embeddings=131072, rope_theta=500000.0, rms_norm_eps=1e-5,
                tie_word_embeddings=False, attn_implementation="sdpa")
