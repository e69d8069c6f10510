"""Vectorized Gymnasium versions of rllab's Box2D control tasks (see README)."""
