req-7f3a	sess-7f3a"Q
node-b10.99.0.1:50051 
node-c10.99.0.2:50051 stories260K-f32 2node-bRb√§ÖbÕÃL?(33s?8*j@p