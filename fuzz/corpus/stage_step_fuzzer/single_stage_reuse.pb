req-7f3a	sess-7f3a"2
node-b10.99.0.1:50051 stories260K-f32 2node-b8@J ç¢è²å®ÃúÏt9bÓ™.}pòWŞG-j%€Iƒ.RbÃb	(33s?8*j@p’	sess-0001