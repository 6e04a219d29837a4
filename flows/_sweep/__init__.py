"""The sweep engine (`flows sweep`): a grid (`grid`), points grouped into batches of equal
shape (`batches`), each point's file written and read back with its checks (`points`),
resumable and optionally distributed (`engine`).
"""
