#include <cstdio>
#include <cuda_runtime.h>
#include <cuda_profiler_api.h>
__global__ void vecadd(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c, long n){long i=blockIdx.x*(long)blockDim.x+threadIdx.x; if(i<n) c[i]=a[i]+b[i];}
__global__ void transpose_naive(const float* __restrict__ x, float* __restrict__ y, int R, int C){int r=blockIdx.y*blockDim.y+threadIdx.y; int c=blockIdx.x*blockDim.x+threadIdx.x; if(r<R&&c<C) y[(long)c*R+r]=x[(long)r*C+c];}
__global__ void matmul_naive(const float* A,const float* B,float* C,int N){int r=blockIdx.y*blockDim.y+threadIdx.y; int c=blockIdx.x*blockDim.x+threadIdx.x; if(r<N&&c<N){float s=0; for(int k=0;k<N;k++) s+=A[(long)r*N+k]*B[(long)k*N+c]; C[(long)r*N+c]=s;}}
__global__ void smem_conflict(float* y){__shared__ float s[32*32]; int t=threadIdx.x; s[t*32%1024]=t; __syncthreads(); y[blockIdx.x*blockDim.x+t]=s[(t*32+1)%1024];}
int main(){long n=1<<26; float *a,*b,*c; cudaMalloc(&a,n*4);cudaMalloc(&b,n*4);cudaMalloc(&c,n*4); cudaMemset(a,0,n*4);cudaMemset(b,0,n*4);
 vecadd<<<(n+255)/256,256>>>(a,b,c,n);
 dim3 blk(32,8); dim3 g(8192/32,8192/8); transpose_naive<<<g,blk>>>(a,c,8192,8192);
 int N=2048; dim3 gb(16,16); dim3 gg(N/16,N/16); matmul_naive<<<gg,gb>>>(a,b,c,N);
 smem_conflict<<<1024,1024>>>(c);
 cudaError_t e=cudaDeviceSynchronize(); printf("done %s\n", cudaGetErrorString(e)); return 0;}
