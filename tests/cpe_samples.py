"""A memory-bound CPE kernel workload the service and dashboard tests share: a padded 3x3 max pool,
its script as TVM prints it."""

POOL_SCRIPT = '''@I.ir_module
class Module:
    @R.function
    def main(p_0: R.Tensor((1, 8, 16, 16), dtype="float32")) -> R.Tensor((1, 8, 8, 8), dtype="float32"):
        with R.dataflow():
            lv: R.Tensor((1, 8, 8, 8), dtype="float32") = R.nn.max_pool2d(p_0, pool_size=[3, 3], strides=[2, 2], dilation=[1, 1], padding=[1, 1, 1, 1], ceil_mode=False, count_include_pad=False, layout="NCHW", out_layout="NCHW")
            gv: R.Tensor((1, 8, 8, 8), dtype="float32") = lv
            R.output(gv)
        return gv
'''  # noqa: E501 - the script as TVM prints it
