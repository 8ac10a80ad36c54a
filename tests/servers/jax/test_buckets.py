from servers.jax.buckets import attn_buckets, buckets


def test_powers_of_two_end_at_the_limit():
    assert buckets(1, 32) == [1, 2, 4, 8, 16, 32]
    assert buckets(16, 100) == [16, 32, 64, 100]          # the limit itself, not 128


def test_half_steps_from_the_threshold_on():
    assert attn_buckets(64, 512) == [64, 128, 192, 256, 384, 512]
    assert attn_buckets(16, 512, 64) == [16, 32, 64, 96, 128, 192, 256, 384, 512]
    assert attn_buckets(64, 300) == [64, 128, 192, 256, 300]   # 384 would pass the limit
