# source: https://github.com/sgl-project/sglang/issues/2591 (4 nodes, 14 H100s; node 1)
# expect: refused: nodes=4 does not divide the 14 ranks
# engine: SGLang 0.4.0 refuses it: launch_engine calls ServerArgs.check_server_args, which asserts tp_size % nnodes == 0 ("tp_size must be divisible by number of nodes"); 14 % 4 != 0
python3 -m sglang.launch_server --model-path /models/dsv3 --tp 14 --dist-init-addr 10.21.99.116:5000 --nnodes 4 --node-rank 0 --trust-remote-code --enable-torch-compile --host 0.0.0.0 --port 30000 --grammar-backend xgrammar
